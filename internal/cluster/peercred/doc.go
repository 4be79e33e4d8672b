// Package peercred proves that an internal request comes from a peer:
// the node that sends it signs it (Credentials.Sign) and the node that
// receives it verifies it (Verifier.Verify).
//
// It is its own room because what a credential covers is a security
// contract that neither the transport (internal/cluster/transport: how to reach the
// nodes and whether they are up) nor the handlers of the internal
// endpoints (gateway/peer.go) should each restate: a credential names the
// sending and the receiving node, the method, the path and query, the
// body's SHA-256, the time and a nonce, so that one seen on the wire is
// good for its own request once, within the clocks' skew, and only from a
// node a membership version lists. docs/scale-out.md says what an
// observer of the network can and cannot do with and without TLS.
package peercred
