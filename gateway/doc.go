// Package gateway is Brand's HTTP face: it serves batch M of epoch N of a
// training job as a tar stream, computed from the job's parameters alone,
// and the endpoints around it (epochs, manifests, samples, importance
// feedback, the cluster's view, statistics, plans, and the peers'
// internal endpoints).
//
// It parses requests (through the one parameter table, package query),
// authenticates them, calls the parts that do the work and writes their
// answers; the parts know nothing of HTTP and do not import this package
// (docs/architecture.md, "Inside the gateway"):
//
//   - catalog: the loaded dataset versions, their reload, the chunk loader
//     that checks every CRC32C;
//   - order: what a job reads — its stream, an epoch's order, a batch's
//     layout and ETag;
//   - schedule: when each chunk is next needed, the cache's eviction by it
//     and the prefetch of what comes next;
//   - peer: the cluster — liveness, index versions, where a chunk's bytes
//     come from, the internal protocol (Solo for a single gateway);
//   - reader: the one path samples are read by, for batches, peers'
//     requests and single samples alike;
//   - feedback: importance sampling's feedback, seals and snapshots;
//   - livestats: what each epoch cost, beside the optimum;
//   - s3face: the S3 face (S3Handler), on the same reader, writer and
//     cache.
//
// Every response that carries samples is written by one writer (internal/respond), under
// write deadlines that bound what a client that stops reading can hold.
// Errors of every part are mapped to HTTP statuses in one place,
// internal/httperr, which the S3 face shares.
//
// A Gateway keeps no package-level state: a process may run several, each
// with its own cache, metrics registry and datasets.
package gateway
