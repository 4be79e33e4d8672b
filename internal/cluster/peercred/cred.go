package peercred

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Headers a node signs its internal requests with (Credentials), and
// HeaderNotMember, set on a 401 whose asker is not a member (ErrNotMember).
const (
	HeaderPeer      = "Brand-Peer"       // the asking node's URL as the members are listed
	HeaderPeerTime  = "Brand-Peer-Time"  // when it signed, in Unix seconds
	HeaderPeerNonce = "Brand-Peer-Nonce" // 16 random bytes, hex: no two credentials alike
	HeaderPeerBody  = "Brand-Peer-Body"  // the body's SHA-256, hex
	HeaderPeerAuth  = "Brand-Peer-Auth"  // the credential
	// HeaderPeerBoot is, on a request, the boot of the receiving node the
	// credential is for, and on a 401 for another boot (ErrOtherBoot),
	// the receiving node's own.
	HeaderPeerBoot  = "Brand-Peer-Boot"
	HeaderNotMember = "Brand-Peer-Unknown"
)

// DefaultSkew is how far a credential's time may be from the receiving
// node's clock, either way, by default: the nodes' clocks must agree
// within it (NTP keeps them within milliseconds).
const DefaultSkew = 30 * time.Second

// ErrUnauthenticated marks an internal request without a valid peer
// credential.
var ErrUnauthenticated = errors.New("not a peer")

// ErrOtherBoot marks a credential signed for another boot of the
// receiving node: one captured before the node restarted, or one from a
// node that has not yet learned of the restart. The refusal names the
// node's boot (HeaderPeerBoot), with which the asker signs again.
var ErrOtherBoot = errors.New("signed for another boot of this node")

// ErrNotMember marks a credential of a node that is not a member of any
// membership version the receiver knows (its source has not listed it
// yet, or never will). The asker takes it for a refusal: the receiver is
// up, and knows nothing of the asker yet.
var ErrNotMember = errors.New("not a member")

// Credentials prove a node is a peer. Every node is given the same secret
// (`brand serve --peer-secret-file`); a node signs each internal request
// it sends with HMAC-SHA256(secret, …) over the request (method, path and
// query, the SHA-256 of its body), the asking node's URL and the URL of
// the node it is sent to, that node's boot (Verifier.Boot), the time and
// a random nonce (Sign). A credential thus names the node by its
// identity, which a membership change does not alter; one node cannot
// speak for another; a client's bearer token, which is not derived from
// the secret, is never a peer's; and a credential seen on the wire is
// good for nothing but its own request, once, to the life of the node it
// was sent to, within the skew (Verifier).
//
// The zero value has no secret: requests carry the node's URL alone,
// internal endpoints accept anyone, and nothing a request claims about
// its sender is believed. `brand serve` warns about that, and refuses a
// cluster with client tokens but no peer secret.
type Credentials struct {
	secret []byte
}

// NewCredentials returns the credentials of secret; an empty secret is
// the zero value.
func NewCredentials(secret []byte) Credentials { return Credentials{secret: secret} }

// Enabled reports whether there is a secret.
func (c Credentials) Enabled() bool { return len(c.secret) > 0 }

// mac is the credential of a request: every field ends with a newline,
// which none of them may hold.
func (c Credentials) mac(from, to, boot, at, nonce, method, target, body string) string {
	m := hmac.New(sha256.New, c.secret)
	for _, f := range []string{"brand-peer-v5", from, to, boot, at, nonce, method, target, body} {
		m.Write([]byte(f))
		m.Write([]byte{'\n'})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// target is what a credential covers of a request's URL: its path below
// the base URL of the node it is sent to (the internal endpoint) and its
// query, as sent.
func target(u *neturl.URL, base string) string {
	p := u.EscapedPath()
	if b, err := neturl.Parse(base); err == nil {
		p = strings.TrimPrefix(p, strings.TrimSuffix(b.EscapedPath(), "/"))
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}

// Sign marks req, with body (nil: none), as sent now by the node at URL
// from to the node at URL to (its base URL, as the members are listed)
// in its boot boot, as that node last named it (HeaderPeerBoot on a 401;
// "" before it has: the node refuses the request, naming its boot).
func (c Credentials) Sign(req *http.Request, from, to, boot string, body []byte) {
	req.Header.Set(HeaderPeer, from)
	if !c.Enabled() {
		return
	}
	var n [16]byte
	_, _ = rand.Read(n[:])
	d := sha256.Sum256(body)
	at, nonce, digest := strconv.FormatInt(time.Now().Unix(), 10), hex.EncodeToString(n[:]), hex.EncodeToString(d[:])
	req.Header.Set(HeaderPeerTime, at)
	req.Header.Set(HeaderPeerNonce, nonce)
	req.Header.Set(HeaderPeerBody, digest)
	req.Header.Set(HeaderPeerBoot, boot)
	req.Header.Set(HeaderPeerAuth, c.mac(from, to, boot, at, nonce, req.Method, target(req.URL, to), digest))
}

// Members says whether a URL names a member of a membership version this
// node knows (membership.Tracker.Knows).
type Members interface {
	Knows(url string) bool
}

// Verifier checks the credentials of the internal requests a node
// receives, remembering those it accepted until they are stale. Safe for
// concurrent use.
//
// What it remembers lives in memory and dies with the process: a node
// restarted within the skew would take again a credential its previous
// life accepted. So each Verifier draws a boot (16 random bytes) that
// every credential it takes must cover: one signed for an earlier life of
// the node is ErrOtherBoot, and replaying a request captured before a
// restart gets nothing but the new boot, which only the secret can sign
// for. No disk is needed: a stateless node is safe across restarts.
type Verifier struct {
	cred    Credentials
	self    string
	boot    string // this life's: hex of 16 random bytes
	skew    int64  // seconds
	members Members

	mu sync.Mutex
	// seen holds each credential accepted until it is stale (Unix
	// seconds); past sweep entries, the stale ones are dropped.
	seen  map[[sha256.Size]byte]int64
	sweep int
}

// maxSeen bounds the credentials a Verifier remembers, refusing others:
// at the default skew, over 16,000 internal requests a second.
const maxSeen = 1 << 20

// NewVerifier returns the verifier of the node at URL self, which takes
// credentials within skew of its clock (DefaultSkew if 0) from the members
// of the versions members knows.
func NewVerifier(cred Credentials, self string, skew time.Duration, members Members) *Verifier {
	if skew <= 0 {
		skew = DefaultSkew
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return &Verifier{cred: cred, self: self, boot: hex.EncodeToString(b[:]), skew: int64(skew / time.Second), members: members,
		seen: map[[sha256.Size]byte]int64{}, sweep: 1024}
}

// Boot is this node's boot, which every credential it takes covers: a
// refusal for another boot names it (HeaderPeerBoot), and the asker signs
// with it from then on.
func (v *Verifier) Boot() string { return v.boot }

// maxPeerURL bounds the URL a request may claim to come from.
const maxPeerURL = 2048

// Verify returns the URL of the node an internal request comes from. With
// a secret, a request is ErrUnauthenticated unless its credential covers
// it, this node and this node's boot (else also ErrOtherBoot), its time is
// within the skew, it was not accepted before, and its sender is a member
// this node knows (else also ErrNotMember); its body fails the handler's
// read unless it is the one covered. Without a secret, every request
// passes and node is "": its claim is not evidence.
func (v *Verifier) Verify(r *http.Request) (node string, err error) {
	if !v.cred.Enabled() {
		return "", nil
	}
	h := r.Header
	u, at, nonce, digest, boot := h.Get(HeaderPeer), h.Get(HeaderPeerTime), h.Get(HeaderPeerNonce), h.Get(HeaderPeerBody), h.Get(HeaderPeerBoot)
	if u == "" || len(u) > maxPeerURL || len(nonce) != 32 || len(digest) != 2*sha256.Size || len(boot) > len(v.boot) {
		return "", ErrUnauthenticated
	}
	mac, err := hex.DecodeString(h.Get(HeaderPeerAuth))
	if err != nil || len(mac) != sha256.Size {
		return "", ErrUnauthenticated
	}
	want, _ := hex.DecodeString(v.cred.mac(u, v.self, boot, at, nonce, r.Method, target(r.URL, v.self), digest))
	if !hmac.Equal(mac, want) {
		return "", ErrUnauthenticated
	}
	if boot != v.boot {
		// A peer's, signed before it learned of this life; or a replay
		// of one captured before the restart.
		return "", fmt.Errorf("%w: %w (a credential for boot %q; this node's is %s)", ErrUnauthenticated, ErrOtherBoot, boot, v.boot)
	}
	t, err := strconv.ParseInt(at, 10, 64)
	if now := time.Now().Unix(); err != nil || t < now-v.skew || t > now+v.skew {
		return "", fmt.Errorf("%w: a stale credential (signed %d s from this node's clock; the nodes' clocks must agree within %d s)",
			ErrUnauthenticated, now-t, v.skew)
	}
	if v.members != nil && !v.members.Knows(u) {
		return "", fmt.Errorf("%w: %w: %s is not a member of any membership version this node knows", ErrUnauthenticated, ErrNotMember, u)
	}
	if !v.first([sha256.Size]byte(mac), t+v.skew) {
		return "", fmt.Errorf("%w: a credential already used", ErrUnauthenticated)
	}
	r.Body = &checkedBody{r: r.Body, h: sha256.New(), want: digest}
	return u, nil
}

// first records a credential until it is stale and reports whether it
// was not recorded already (or there is no room left).
func (v *Verifier) first(mac [sha256.Size]byte, stale int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.seen[mac]; ok {
		return false
	}
	if len(v.seen) >= v.sweep {
		now := time.Now().Unix()
		for k, until := range v.seen {
			if until < now {
				delete(v.seen, k)
			}
		}
		v.sweep = max(2*len(v.seen), 1024)
	}
	if len(v.seen) >= maxSeen {
		return false
	}
	v.seen[mac] = stale
	return true
}

// checkedBody is a request's body checked against the digest its
// credential covers: a body that ends with another digest fails the read.
type checkedBody struct {
	r    io.ReadCloser
	h    hash.Hash
	want string
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.h.Write(p[:n])
	if err == io.EOF && hex.EncodeToString(b.h.Sum(nil)) != b.want {
		return n, fmt.Errorf("%w: the body is not the one its credential covers", ErrUnauthenticated)
	}
	return n, err
}

func (b *checkedBody) Close() error { return b.r.Close() }
