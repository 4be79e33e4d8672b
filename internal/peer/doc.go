// Package peer is a gateway's part in a cluster: its view of the other
// nodes (Set: liveness, the index versions each holds, which node a
// chunk's bytes come from), the internal protocol the nodes speak (one
// file, protocol.go, both sides: a node asking a chunk's owner for
// samples, probing a node's state, collecting a node's importance
// feedback), how a node proves it is a peer (Credentials), and the
// samples fetched from peers ahead of the batch that needs them (Ahead).
//
// A single gateway is Solo: the view of a cluster of one, in which every
// chunk is read here. Code that reads samples asks its Sources which node
// to read from and never checks whether there is a cluster.
//
// # Failures
//
// What went wrong with a peer decides what it costs the peer (Set.Fetch
// classifies at the edge): a refused connection, a timeout, a 503 or
// bytes that fail their CRC32C hold the node down (2 s, doubling per
// renewed failure up to a minute), whatever its probes say; a 409 (the
// node does not hold the index version asked for), another 4xx or a store
// error it reports are answered by reading the samples elsewhere, and the
// node stays up: a data error is not a dead node.
package peer
