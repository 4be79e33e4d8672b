// Package bench is Brand's benchmark harness: in one run on one machine it
// measures Brand's gateway beside the ceilings any gateway is bounded by and
// beside what users pick instead, on a synthetic dataset in a real MinIO it
// starts on loopback, and checks the project's performance targets on ratios
// measured side by side. The command brand-bench runs it; the package is
// internal, and kept out of the brand binary, so that the server (and its
// image) links neither the harness nor its charting libraries.
//
// # What a run measures
//
//   - Limits. (a) A plain reverse proxy that streams whole chunks from the
//     store to the client: the ceiling of any gateway's cold path. (a′) A
//     server that reads each chunk whole into a buffer it keeps and writes
//     it: the least a caching gateway does; (a″) the same checking every
//     sample's CRC32C as it arrives, as Brand's loader does. (b) A plain Go
//     HTTP server that serves the same chunk bytes from memory: the ceiling
//     of the warm path; (b′) the same server asked for slices of a batch's
//     size. Each runs as a process of its own (`brand-bench limit`,
//     ServeLimit), as the gateway does, at the best of several client
//     concurrencies; (a) is also measured with the proxy inside this
//     process, to show what the process boundary costs.
//   - Baselines. (c) One GET per sample, the samples stored as individual
//     objects, read in shuffled order by N concurrent readers: how a PyTorch
//     Dataset over S3 reads. (d) WebDataset: whole shards streamed in shuffled
//     shard order through an in-memory shuffle buffer.
//   - Brand. The Go client reads epochs through a `brand serve` process with
//     the cache at fractions of the dataset (25 %, 50 %, 100 % by default):
//     epoch 0 is cold, the later ones show the steady state.
//   - Policies. With the cache at half the dataset, the same job under the
//     lru and next-use policies over several epochs, beside the planner's
//     optimum and simulation of the same trace.
//   - Python. PyTorch's DataLoader over a map-style Dataset that GETs each
//     sample with boto3 (p), the same DataLoader over brand.torch's
//     BrandDataset through fresh gateways, and the Python client beside the
//     Go client on one gateway: python/bench/loaders.py, a process of its
//     own for every measurement, reporting its own figures and CPU time.
//     Skipped, with the reason in the report, where no Python imports torch
//     and boto3.
//
// Every configuration reports samples/s, MB/s, read amplification (bytes
// read from the store ÷ bytes delivered), the cache hit ratio, the p50 and
// p99 batch latency, the CPU time of every process (this one, the gateway,
// MinIO) and, for Brand, the gateway's peak RSS and start-up time. On a
// machine whose cores the three processes share, CPU per byte is what
// decides throughput, and the CPU table says which process spends it.
//
// # Method
//
// The gateway runs as its own process (the brand binary's serve command) so
// that its peak RSS (VmHWM) and its CPU time are its own; its backend bytes and hit counts come
// from its /metrics and /stats endpoints. Each Brand configuration starts a
// fresh gateway, so its first epoch is cold. Every client decodes what it
// receives into samples held in memory — the work a training loop's data
// pipeline does — and all of them decode alike (a whole body read into one
// buffer, decoded in place by client.DecodeTar), so that configurations
// differ in how the bytes arrive, not in their decoders. Buffers are reused
// alike: the loop releases each Brand batch once counted (Batch.Release),
// and the limits' clients reuse a body's buffer once its last sample is
// counted; WebDataset-style (d), whose shuffle buffer keeps samples long
// after their shard was read, reads each shard into a fresh one. Brand's
// warm path is also measured at each of Config.Brand.AheadLevels batches in
// flight, as the limits are at each concurrency level. A batch's latency
// is the time the consuming loop waits for it. Bytes delivered are HTTP body bytes (tar framing included, which is
// what makes read amplification exactly 1 for a chunk read once).
//
// Generating and uploading the data is setup and is not measured. Client,
// gateway and MinIO share the machine, so the figures are ratios measured in
// the same run, not absolute claims about any deployment.
//
// # The other benchmarks
//
// Beside Run, each benchmark of brand-bench (jobs, mix, schedule, resize,
// formats, appends, s3face, tensors, video, train, tokens, index) is a
// configuration that embeds Harness, its zero fields filled from its
// Default…Config by fillZero, a Run… function, and a report that embeds
// Header and writes itself as text and JSON, and as a chart where it has
// a Chart method (harness.go). brand-bench gives each one its command
// with a benchmark value (cmd/brand-bench/benchmark.go): a new benchmark
// writes only its figures, its flags, its run and its report.
package bench
