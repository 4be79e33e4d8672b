// Package gateway is Brand's HTTP API: it serves batch M of epoch N of a
// training job as a tar stream, computed from the job's parameters alone.
//
// A request flows one way through small parts, each built from the few
// things it uses (docs/architecture.md, "Inside the gateway"): its query
// is parsed through one table of parameters (params.go); the catalog finds
// the dataset and orders the epoch's memoised order (orders.go); the batch
// is laid out — which samples, in which chunks, at which bytes (layout.go);
// the schedule records the job stream's position and republishes when each
// chunk is next needed (schedule.go); the chunk cache, whose eviction
// policy reads that table (policy.go), pins the batch's chunks, each read
// from the store once and checked against the index's CRC32C on entry
// (loader.go); and the samples' tar bytes are written straight from the
// cached chunks (batch.go, body.go). Because the whole batch is pinned, or
// assembled (parts.go), before the status line is written, a batch is
// never served partially.
//
// Because the order of every epoch is known, the gateway also prefetches
// the chunks of each stream's next windows — across the epoch boundary —
// in the background (prefetch.go), and keeps per-epoch figures with the
// optimal policy's beside them (livestats.go).
//
// A Gateway keeps no package-level state: a process may run several, each
// with its own cache, metrics registry and datasets.
package gateway
