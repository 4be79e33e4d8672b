// Package gateway is Brand's HTTP face: it serves batch M of epoch N of a
// training job as a tar stream, computed from the job's parameters alone,
// and the endpoints around it (epochs, manifests, samples, importance
// feedback, the cluster's view, statistics, plans, and on a cluster the
// peers' internal endpoints).
//
// It authenticates requests, bounds their bodies per route (bodies, on
// internal/server/reqbody: a size and a read deadline each, a refused request
// answered before its body is read), resolves what a request's job
// reads (jobs), hands the batch to the stages that do the work and
// writes their answers; the stages know nothing of HTTP and do not import this package
// (docs/architecture.md, "Data path: one path for every batch"):
//
//   - order: a batch's layout — its parts, their samples, the order they
//     are served in, its ETag — one part for a dataset, several for a
//     mixture;
//   - visit: every batch's visit to the schedule (begin, follow and
//     prefetch, fetch ahead, turn, finish) and its read;
//   - reader: the one path samples are read by, for batches, peers'
//     requests and single samples alike;
//   - respond: the one writer of every response that carries samples,
//     under write deadlines that bound what a client that stops reading
//     can hold;
//   - s3face: the S3 face (S3Handler), on the same reader, writer and
//     cache;
//   - catalog, schedule, feedback, livestats: the loaded dataset
//     versions, when each chunk is next needed, importance sampling's
//     state, what each epoch cost;
//   - on a cluster, three rooms (cluster.go): peer (how to reach the
//     other nodes, whether they are up), membership (who the members
//     are, what the nodes agree on) and route (which node a chunk's bytes
//     come from).
//
// Errors of every part are mapped to HTTP statuses in one place,
// internal/server/httperr (statusOf), which the S3 face shares.
// A Gateway keeps no package-level state: a process may run several, each
// with its own cache, metrics registry and datasets.
package gateway
