package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/brandgw/brand/internal/server/reqbody"
)

// bodies bounds the request bodies of the gateway's routes
// (internal/server/reqbody): each route is registered with none (it takes no
// body) or upTo its bound, in routes; a request refused before its body
// is read (a missing credential, an unknown path, a declared length over
// the bound) is answered at once and its connection closed. Every body a
// route takes is read whole within its deadline (timeout or large, from
// the handler's start, its waits for memory included) and decoded
// within the memory manager's decodes share (mem), perByte bytes of it a
// byte of the body, reserved before the body is read and held until its
// handler returns: a few large bodies at once wait for each other, or are
// refused, rather than take the node past --memory-limit. Bodies hold
// that share below the decodes that serve batches, which they give their
// room way to, and a client holds at most a quarter of it while another
// client's body waits (memory.Account.Hold); a wait for room is at most
// bodyWait.
type bodies struct {
	// timeout bounds reading a body; large that of the two bodies that
	// may be large, importance feedback and an exclusion list
	// (Config.BodyTimeout and LargeBodyTimeout).
	timeout, large time.Duration
	// mem is the share bodies are decoded in: the decodes share, where
	// images and chunks served in place are decoded.
	mem reqbody.Memory
}

// bodyWait is the most a body waits for room in the decodes share, within
// its deadline: past it, 503 with Retry-After. A body waits only for the
// decodes serving batches and for other clients' bodies within their
// share, which hold it for moments; a client sending more waits less in
// the kernel's buffers with its connection held.
const bodyWait = 2 * time.Second

// client names who sends r, for a client's share of the memory bodies
// hold: its bearer token (a digest: the secret is kept nowhere else) and
// its remote address, not its port, so that a client's many connections
// are one client.
func client(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	token := ""
	if scheme, t, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		d := sha256.Sum256([]byte(strings.TrimSpace(t)))
		token = hex.EncodeToString(d[:8])
	}
	return token + "@" + host
}

// What a byte of a route's body takes while its handler runs (Bound's
// PerByte), measured by TestBodiesWithinTheMemoryLimit and the handlers'
// decoders:
//   - an exclusion list, decoded as it streams in (reqbody.DecodeLargeJSON):
//     each key a string of its own beside its header (about 80 bytes for
//     a key of 60 in 63 of JSON), the slice of them growing, and the edit
//     stored from them encoded again as JSON (its bytes, and the buffer
//     they grow in);
//   - a JSON body read whole and then decoded (reqbody.DecodeJSON): the
//     body, the buffer it grew in, and what is decoded from it;
//   - a binary body (the peers' IDs, importance feedback's records):
//     the body and its decoded form, of about the same size.
const (
	perByteExclusion = 4
	perByteJSON      = 4
	perByteBinary    = 2
)

// none bounds a route that takes no body: a body declared is refused
// before it is read, and one sent without a length must end at once.
func (b bodies) none(next http.Handler) http.Handler {
	return b.upTo(func() int64 { return 0 }, b.timeout, 1)(next)
}

// upTo bounds a route's body: at most most() bytes, read within timeout,
// each byte taking perByte bytes of the decodes share until the handler
// returns.
func (b bodies) upTo(most func() int64, timeout time.Duration, perByte int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			bound := reqbody.Bound{Bytes: most(), Timeout: timeout, Memory: b.mem, PerByte: perByte, Wait: bodyWait}
			if r.ContentLength != 0 { // a body, declared or chunked: not a batch's GET
				bound.Client = client(r)
			}
			release, err := reqbody.Apply(w, r, bound)
			defer release()
			if err != nil {
				writeError(r.Context(), w, err)
				return
			}
			next.ServeHTTP(&answerUnread{ResponseWriter: w, r: r}, r)
		})
	}
}

// answerUnread makes an answer its handler gives before reading the
// request's body whole the connection's last (reqbody.Refuse): the
// server would otherwise read the rest of the body, for as long as the
// client took, up to its deadline, before the answer went out. An
// invalid query of a POST was answered 400 only after the 30 s body
// deadline (TestQueryRefusedBeforeTheBody).
type answerUnread struct {
	http.ResponseWriter
	r     *http.Request
	wrote bool
}

func (a *answerUnread) WriteHeader(code int) {
	if !a.wrote {
		a.wrote = true
		if reqbody.Unread(a.r) {
			reqbody.Refuse(a.ResponseWriter, a.r)
		}
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerUnread) Write(p []byte) (int, error) {
	if !a.wrote {
		a.WriteHeader(http.StatusOK)
	}
	return a.ResponseWriter.Write(p)
}

// Unwrap is for http.ResponseController.
func (a *answerUnread) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// fixed is a bound that does not change.
func fixed(n int64) func() int64 { return func() int64 { return n } }

// loaded answers a request 503 (catalog.ErrNotReady, which says why)
// while the datasets of c are still loading: a question about their
// chunks is then bounded by none of them (neededBodyBytes is 0), and was
// refused 400 as a body too large, which the asker took for a refusal
// rather than a node starting (a peer's hand-back to a node it heard from
// as it started).
func loaded(c interface{ NotReady() error }) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := c.NotReady(); err != nil {
				refuseBody(w, r)
				writeError(r.Context(), w, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// neededBodyBytes bounds a peer's question about needed chunks (their
// IDs, 4 bytes each): every chunk of the largest dataset version held.
// The handler checks the question against the version it names.
func (g *Gateway) neededBodyBytes() int64 {
	var most int64
	for _, name := range g.catalog.Names() {
		held, _ := g.catalog.Held(name)
		for _, ds := range held {
			most = max(most, 4*int64(ds.Index.NumChunks()))
		}
	}
	return most
}
