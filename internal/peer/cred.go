package peer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
)

// Headers a node signs its internal requests with.
const (
	HeaderPeer     = "Brand-Peer"      // the asking node's position in the peer list
	HeaderPeerAuth = "Brand-Peer-Auth" // its credential: see Credentials
)

// ErrUnauthenticated marks an internal request without a valid peer
// credential.
var ErrUnauthenticated = errors.New("not a peer")

// Credentials prove a node is a peer. Every node is given the same secret
// (`brand serve --peer-secret-file`); node k's credential is
// HMAC-SHA256(secret, "brand-peer-v2|k"), sent with its position. A
// node's credential thus names the node: one node cannot speak for
// another, and a client's bearer token, which is not derived from the
// secret, is never a peer's.
//
// The zero value has no secret: requests carry the node's position alone,
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

func (c Credentials) mac(node int) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte("brand-peer-v2|"))
	m.Write(strconv.AppendInt(nil, int64(node), 10))
	return hex.EncodeToString(m.Sum(nil))
}

// Sign marks req as sent by node self.
func (c Credentials) Sign(req *http.Request, self int) {
	req.Header.Set(HeaderPeer, strconv.Itoa(self))
	if c.Enabled() {
		req.Header.Set(HeaderPeerAuth, c.mac(self))
	}
}

// Verify returns the node an internal request comes from. With a secret,
// a request without a valid credential for a node of the nodes configured
// is ErrUnauthenticated. Without one, every request passes and node is
// -1: its claim is not evidence.
func (c Credentials) Verify(r *http.Request, nodes int) (node int, err error) {
	if !c.Enabled() {
		return -1, nil
	}
	k, err := strconv.Atoi(r.Header.Get(HeaderPeer))
	if err != nil || k < 0 || k >= nodes {
		return -1, ErrUnauthenticated
	}
	if !hmac.Equal([]byte(r.Header.Get(HeaderPeerAuth)), []byte(c.mac(k))) {
		return -1, ErrUnauthenticated
	}
	return k, nil
}
