// Package transport is how a node of a cluster reaches the other nodes and
// whether they are up — etcd's rafthttp beside its membership: the
// internal protocol the nodes speak (one file, protocol.go, both sides: a
// node asking a chunk's owner for samples, probing a node's state, asking
// for a membership version's members, collecting a node's importance
// feedback, asking the latest step of a job a node has served (before an
// edit of the job's schedule), and, in a membership change, asking which chunks the jobs
// need soon and for a chunk's bytes from its old owner's cache), the
// client of each node, through which every one of those requests goes
// by one call path (Client: build, sign, send, classify), how a node
// proves it is a peer (internal/cluster/peercred), and what this node last learnt of
// each other one (Nodes: its slot, liveness, state and figures), and
// the questions it puts to them beside a batch's samples (Asks), which say
// nothing of their liveness.
//
// It carries bytes and small wire types of its own: a dataset version as
// a request names it (Dataset), a job stream and its position (Stream,
// Origin), the questions and answers; what a node says of itself is a
// nodestate.State. What a request means to the node that serves it — its
// parameters read through that node's table (internal/job/query), an
// index version it holds (internal/job/catalog), a stream it lays out —
// is internal/cluster/peerreq's, so this package imports nothing of
// internal/batch or internal/job.
//
// Who the members are, and which versions the cluster agrees on, is
// package membership's; which node a chunk's bytes come from is package
// route's. Both read what Nodes learns; Nodes probes the nodes membership
// names and tells it what it learns (nodestate.Watcher). Each node known keeps its
// slot — the int the reader and the gateway name it by — for life, so
// that membership changes never renumber what is in flight.
//
// # Failures
//
// What went wrong with a peer decides what it costs the peer (Nodes.Fetch
// classifies at the edge): a refused connection, a timeout, a 503 or
// bytes that fail their CRC32C hold the node down (2 s, doubling per
// renewed failure up to a minute), whatever its probes say; a 409 (the
// node does not hold the index version asked for), another 4xx or a store
// error it reports are answered by reading the samples elsewhere, and the
// node stays up: a data error is not a dead node.
package transport
