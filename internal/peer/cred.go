package peer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
)

// Headers a node signs its internal requests with.
const (
	HeaderPeer     = "Brand-Peer"      // the asking node's URL as the members are listed
	HeaderPeerAuth = "Brand-Peer-Auth" // its credential: see Credentials
)

// ErrUnauthenticated marks an internal request without a valid peer
// credential.
var ErrUnauthenticated = errors.New("not a peer")

// Credentials prove a node is a peer. Every node is given the same secret
// (`brand serve --peer-secret-file`); the credential of the node at URL u
// is HMAC-SHA256(secret, "brand-peer-v3|u"), sent with u. A node's
// credential thus names the node by its identity, which a membership
// change does not alter (a position in a list would): one node cannot
// speak for another, and a client's bearer token, which is not derived
// from the secret, is never a peer's.
//
// The zero value has no secret: requests carry the node's URL alone,
// internal endpoints accept anyone, and nothing a request claims about
// its sender is believed (a node is not taken for up because a request
// says it came from there). `brand serve` warns about that, and refuses a
// cluster with client tokens but no peer secret.
type Credentials struct {
	secret []byte
}

// NewCredentials returns the credentials of secret; an empty secret is
// the zero value.
func NewCredentials(secret []byte) Credentials { return Credentials{secret: secret} }

// Enabled reports whether there is a secret.
func (c Credentials) Enabled() bool { return len(c.secret) > 0 }

func (c Credentials) mac(node string) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte("brand-peer-v3|"))
	m.Write([]byte(node))
	return hex.EncodeToString(m.Sum(nil))
}

// Sign marks req as sent by the node at URL self.
func (c Credentials) Sign(req *http.Request, self string) {
	req.Header.Set(HeaderPeer, self)
	if c.Enabled() {
		req.Header.Set(HeaderPeerAuth, c.mac(self))
	}
}

// maxPeerURL bounds the URL a request may claim to come from.
const maxPeerURL = 2048

// Verify returns the URL of the node an internal request comes from. With
// a secret, a request without a valid credential is ErrUnauthenticated:
// any URL with its credential is a peer's, since only nodes hold the
// secret (a node that has just joined is known by its first request).
// Without one, every request passes and node is "": its claim is not
// evidence.
func (c Credentials) Verify(r *http.Request) (node string, err error) {
	if !c.Enabled() {
		return "", nil
	}
	u := r.Header.Get(HeaderPeer)
	if u == "" || len(u) > maxPeerURL {
		return "", ErrUnauthenticated
	}
	if !hmac.Equal([]byte(r.Header.Get(HeaderPeerAuth)), []byte(c.mac(u))) {
		return "", ErrUnauthenticated
	}
	return u, nil
}
