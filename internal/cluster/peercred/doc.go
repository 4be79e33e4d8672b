// Package peercred proves that an internal request comes from a peer:
// the node that sends it signs it (Credentials.Sign) and the node that
// receives it verifies it (Verifier.Verify).
//
// It is its own room because what a credential covers is a security
// contract that neither the transport (internal/cluster/transport: how to reach the
// nodes and whether they are up) nor the handlers of the internal
// endpoints (gateway/peer.go) should each restate: a credential names the
// sending and the receiving node, the receiving node's boot, the method,
// the path and query, the body's SHA-256, the time and a nonce.
//
// # What a captured credential is good for
//
// Its own request — that method, path, query and body, from that node to
// that node — once, within the clocks' skew, to the life of the receiving
// node it was signed for, and only from a node a membership version
// lists. Once: the receiver remembers each credential it took until it is
// stale. To that life: the receiver draws a boot when it starts
// (Verifier.Boot), the sender signs for the boot the receiver last named
// (a 401 with HeaderPeerBoot, after which it signs again), and a
// credential for another boot is refused (ErrOtherBoot). So a request
// captured before a node restarted, replayed to it within the skew after
// the restart, when the set of credentials taken was lost with the
// process, is refused as well: nothing is written to disk, and a
// stateless node needs none. docs/scale-out.md says what an observer of
// the network can and cannot do with and without TLS.
package peercred
