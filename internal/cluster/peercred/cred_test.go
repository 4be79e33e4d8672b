package peercred

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// members knows the URLs it lists.
type members map[string]bool

func (m members) Knows(u string) bool { return m[u] }

const (
	a = "http://10.0.0.1:7070"
	b = "http://10.0.0.2:7070/base"
)

// signed is a request from a to b's internal endpoint in b's boot boot,
// with body, signed by cred; edit changes it after signing.
func signed(cred Credentials, boot, method, target string, body []byte, edit func(*http.Request)) *http.Request {
	req := httptest.NewRequest(method, b+target, bytes.NewReader(body))
	cred.Sign(req, a, b, boot, body)
	if edit != nil {
		edit(req)
	}
	return req
}

// TestVerify: a credential is good for its own request, once, within the
// skew, from a member, with its own body; everything else is
// ErrUnauthenticated (a non-member also ErrNotMember).
func TestVerify(t *testing.T) {
	cred := NewCredentials([]byte("the cluster's secret"))
	body := []byte(`{"ids":[1,2,3]}`)
	tests := []struct {
		name      string
		sign      Credentials
		path      string
		edit      func(*http.Request)
		known     members
		ok        bool
		notMember bool
		otherBoot bool
	}{
		{name: "its own request", sign: cred, path: "/internal/v2/samples?dataset=d", known: members{a: true}, ok: true},
		{name: "another secret", sign: NewCredentials([]byte("another")), path: "/internal/v2/samples?dataset=d", known: members{a: true}},
		{name: "no secret", sign: Credentials{}, path: "/internal/v2/samples?dataset=d", known: members{a: true}},
		{name: "another query", sign: cred, path: "/internal/v2/samples?dataset=d",
			edit: func(r *http.Request) { r.URL.RawQuery = "dataset=e" }, known: members{a: true}},
		{name: "another method", sign: cred, path: "/internal/v2/samples?dataset=d",
			edit: func(r *http.Request) { r.Method = http.MethodPut }, known: members{a: true}},
		{name: "another sender claimed", sign: cred, path: "/internal/v2/samples?dataset=d",
			edit: func(r *http.Request) { r.Header.Set(HeaderPeer, "http://10.0.0.3:7070") }, known: members{a: true, "http://10.0.0.3:7070": true}},
		{name: "stale", sign: cred, path: "/internal/v2/samples?dataset=d",
			edit: func(r *http.Request) {
				// Re-signed as of two minutes ago: the time is covered, so
				// only a credential made then carries it.
				at := strconv.FormatInt(time.Now().Add(-2*time.Minute).Unix(), 10)
				r.Header.Set(HeaderPeerTime, at)
				r.Header.Set(HeaderPeerAuth, cred.mac(a, b, r.Header.Get(HeaderPeerBoot), at, r.Header.Get(HeaderPeerNonce), r.Method, target(r.URL, b), r.Header.Get(HeaderPeerBody)))
			}, known: members{a: true}},
		{name: "another boot of the receiver", sign: cred, path: "/internal/v2/samples?dataset=d",
			edit: func(r *http.Request) {
				// Signed, with the secret, for a boot that is not the
				// receiver's: the boot is covered, so only a credential
				// made for that boot carries it.
				boot := "0123456789abcdef0123456789abcdef"
				r.Header.Set(HeaderPeerBoot, boot)
				r.Header.Set(HeaderPeerAuth, cred.mac(a, b, boot, r.Header.Get(HeaderPeerTime), r.Header.Get(HeaderPeerNonce), r.Method, target(r.URL, b), r.Header.Get(HeaderPeerBody)))
			}, known: members{a: true}, otherBoot: true},
		{name: "another boot claimed", sign: cred, path: "/internal/v2/samples?dataset=d",
			edit: func(r *http.Request) { r.Header.Set(HeaderPeerBoot, "0123456789abcdef0123456789abcdef") }, known: members{a: true}},
		{name: "not a member", sign: cred, path: "/internal/v2/samples?dataset=d", known: members{}, notMember: true},
		{name: "truncated credential", sign: cred, path: "/internal/v2/samples?dataset=d",
			edit: func(r *http.Request) { r.Header.Set(HeaderPeerAuth, r.Header.Get(HeaderPeerAuth)[:10]) }, known: members{a: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewVerifier(cred, b, 0, tt.known)
			req := signed(tt.sign, v.Boot(), http.MethodPost, tt.path, body, tt.edit)
			node, err := v.Verify(req)
			if tt.ok != (err == nil) || err != nil && !errors.Is(err, ErrUnauthenticated) || tt.notMember != errors.Is(err, ErrNotMember) ||
				tt.otherBoot != errors.Is(err, ErrOtherBoot) {
				t.Fatalf("Verify = %q, %v; want ok %v, not a member %v, another boot %v", node, err, tt.ok, tt.notMember, tt.otherBoot)
			}
			if !tt.ok {
				return
			}
			if node != a {
				t.Fatalf("Verify named %q, want %q", node, a)
			}
			got, err := io.ReadAll(req.Body)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("the covered body read as %q, %v", got, err)
			}
			// The same credential again: a replay.
			again := signed(cred, v.Boot(), http.MethodPost, tt.path, body, nil)
			again.Header = req.Header.Clone()
			if _, err := v.Verify(again); !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("a replayed credential: %v, want ErrUnauthenticated", err)
			}
		})
	}
}

// TestVerifyBody: a body other than the one signed fails the handler's
// read, not Verify (which reads no body).
func TestVerifyBody(t *testing.T) {
	cred := NewCredentials([]byte("s"))
	v := NewVerifier(cred, b, 0, members{a: true})
	req := signed(cred, v.Boot(), http.MethodPost, "/internal/v2/samples", []byte("signed"), func(r *http.Request) {
		r.Body = io.NopCloser(bytes.NewReader([]byte("swapped")))
	})
	if _, err := v.Verify(req); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(req.Body); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("reading a swapped body: %v, want ErrUnauthenticated", err)
	}
}

// TestNoSecret: without a secret every request passes and names no node:
// a claim is not evidence.
func TestNoSecret(t *testing.T) {
	v := NewVerifier(Credentials{}, b, 0, members{})
	node, err := v.Verify(signed(Credentials{}, "", http.MethodGet, "/internal/v2/state", nil, nil))
	if err != nil || node != "" {
		t.Fatalf("Verify = %q, %v; want \"\", nil", node, err)
	}
}

// TestReplayAfterRestart: a request the node took, captured on the wire
// and replayed to it after it restarted — within the skew, when the
// credentials it took were lost with the process — is refused
// (ErrOtherBoot), and the refusal names the new boot; the peer that signs
// for it then is taken, once.
func TestReplayAfterRestart(t *testing.T) {
	cred := NewCredentials([]byte("the cluster's secret"))
	body := []byte("ids")
	before := NewVerifier(cred, b, 0, members{a: true})
	captured := signed(cred, before.Boot(), http.MethodPost, "/internal/v2/samples?dataset=d", body, nil)
	if _, err := before.Verify(captured); err != nil {
		t.Fatal(err)
	}
	after := NewVerifier(cred, b, 0, members{a: true}) // the node restarted
	if after.Boot() == before.Boot() {
		t.Fatalf("two lives of a node drew one boot, %s", after.Boot())
	}
	replay := httptest.NewRequest(http.MethodPost, b+"/internal/v2/samples?dataset=d", bytes.NewReader(body))
	replay.Header = captured.Header.Clone()
	if _, err := after.Verify(replay); !errors.Is(err, ErrUnauthenticated) || !errors.Is(err, ErrOtherBoot) {
		t.Fatalf("a credential taken before the restart, replayed after it: %v; want ErrUnauthenticated, ErrOtherBoot", err)
	}
	fresh := signed(cred, after.Boot(), http.MethodPost, "/internal/v2/samples?dataset=d", body, nil)
	if _, err := after.Verify(fresh); err != nil {
		t.Fatalf("a credential for the new boot: %v", err)
	}
}
