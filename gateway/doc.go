// Package gateway is Brand's HTTP API: it serves batch M of epoch N of a
// training job as a tar stream, computed from the job's parameters alone.
//
// A request flows one way: parse and bound the job parameters (params.go),
// ask the shuffle which sample IDs form the batch (batch.go), pin the chunks
// holding them in the chunk cache — each fetched from the store once and
// checked against the index's CRC32C on entry (loader.go) — and write the
// samples' tar byte ranges straight from the cached chunk bytes to the
// socket, followed by the end-of-archive blocks. Because the whole batch is
// pinned before the status line is written, a batch is never served
// partially.
//
// Because the order of every epoch is known, the gateway also tracks each
// job stream's position and prefetches the chunks of the next window — and,
// at the end of an epoch, of the next epoch's first window — in the
// background (prefetch.go).
//
// A Gateway keeps no package-level state: a process may run several, each
// with its own cache, metrics registry and datasets.
package gateway
