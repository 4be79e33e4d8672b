package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/server/reqbody"
)

// tokenSet holds the bearer tokens a gateway accepts, as SHA-256 digests:
// comparing digests of equal length in constant time tells an attacker
// nothing about a token's length or prefix from the time a refusal takes.
type tokenSet [][sha256.Size]byte

func newTokenSet(tokens []string) tokenSet {
	s := make(tokenSet, 0, len(tokens))
	for _, t := range tokens {
		s = append(s, sha256.Sum256([]byte(t)))
	}
	return s
}

// accepts reports whether the request's bearer token is one of the set. It
// compares against every token, whatever matches first.
func (s tokenSet) accepts(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return false
	}
	d := sha256.Sum256([]byte(strings.TrimSpace(token)))
	found := 0
	for i := range s {
		found |= subtle.ConstantTimeCompare(d[:], s[i][:])
	}
	return found == 1
}

// authenticate refuses requests without an accepted bearer token, with 401
// and a WWW-Authenticate challenge, none of their body read and their
// connection closed (reqbody.Refuse). With no tokens configured every request
// passes: authentication is opt-in (`brand serve --auth-token-file`).
func (g *Gateway) authenticate(next http.Handler) http.Handler {
	if len(g.tokens) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.tokens.accepts(r) {
			reqbody.Refuse(w, r)
			w.Header().Set("WWW-Authenticate", `Bearer realm="brand"`)
			writeJSON(w, http.StatusUnauthorized, api.Error{Error: "a bearer token is required (Authorization: Bearer <token>)", Status: http.StatusUnauthorized})
			return
		}
		next.ServeHTTP(w, r)
	})
}
