// Package peer is a gateway's part in a cluster: its view of the other
// nodes (Set: the membership versions it lists, reports and the cluster
// agrees on, liveness, the index versions each holds, which node a
// chunk's bytes come from), the internal protocol the nodes speak (one
// file, protocol.go, both sides: a node asking a chunk's owner for
// samples, probing a node's state, asking for a membership version's
// members, collecting a node's importance feedback, and, in a membership
// change, asking which chunks the jobs need soon and for a chunk's bytes
// from its old owner's cache), how a node proves it
// is a peer (Credentials), and the samples fetched from peers ahead of
// the batch that needs them (Ahead).
//
// # Membership
//
// Nodes are known by their URLs, which a Lister (package membership)
// lists; a list is a cluster.Membership named by a hash of the set,
// without the members whose state says they leave (Leave). Each node
// reports the version it uses in its state once Config.Warm has loaded
// the chunks it gains (internal/handover) and no other member of the
// version is still warming up for it, within Config.FlipTimeout; the
// cluster agrees on the version most live nodes report (members.go). A
// node warming up says so (State.Warming), and its peers read its chunks
// from their old owners meanwhile (Source). A node keeps each node it has known in a slot — the int
// the reader and the gateway name it by — for its life, so that
// membership changes never renumber what is in flight.
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
