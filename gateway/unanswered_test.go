package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
)

// TestParseUnanswered: a client's word that a node did not answer
// (api.HeaderUnanswered, api.HeaderUnansweredFor) is taken only as one
// absolute URL and one wait of 1 ms to a minute in digits; anything else
// a hostile or broken client sends is ignored, the request's context left
// as it came (unansweredContext), and never refused: the word only ever
// speeds a read up.
func TestParseUnanswered(t *testing.T) {
	const node = "http://10.0.0.2:8080"
	tests := []struct {
		name    string
		u, f    []string // the headers' values; nil: absent
		waited  time.Duration
		allowed bool
	}{
		{"a member's word", []string{node}, []string{"450"}, 450 * time.Millisecond, true},
		{"https", []string{"https://node-2.example:443"}, []string{"1"}, time.Millisecond, true},
		{"a minute", []string{node}, []string{"60000"}, time.Minute, true},
		{"no headers", nil, nil, 0, false},
		{"no wait", []string{node}, nil, 0, false},
		{"no node", nil, []string{"450"}, 0, false},
		{"empty node", []string{""}, []string{"450"}, 0, false},
		{"zero", []string{node}, []string{"0"}, 0, false},
		{"negative", []string{node}, []string{"-450"}, 0, false},
		{"signed", []string{node}, []string{"+450"}, 0, false},
		{"past a minute", []string{node}, []string{"60001"}, 0, false},
		{"overflows", []string{node}, []string{"99999999999999999999999"}, 0, false},
		{"not a number", []string{node}, []string{"1e3"}, 0, false},
		{"spaces", []string{node}, []string{" 450"}, 0, false},
		{"seconds", []string{node}, []string{"0.45"}, 0, false},
		{"node twice", []string{node, "http://10.0.0.3:8080"}, []string{"450"}, 0, false},
		{"wait twice", []string{node}, []string{"450", "10"}, 0, false},
		{"not a URL", []string{"node-2"}, []string{"450"}, 0, false},
		{"another scheme", []string{"file:///etc/passwd"}, []string{"450"}, 0, false},
		{"no host", []string{"http://"}, []string{"450"}, 0, false},
		{"a bad escape", []string{"http://10.0.0.2:8080/%zz"}, []string{"450"}, 0, false},
		{"too long", []string{node + "/" + strings.Repeat("a", maxUnansweredURL)}, []string{"450"}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/samples/k", nil)
			for _, v := range tc.u {
				r.Header.Add(api.HeaderUnanswered, v)
			}
			for _, v := range tc.f {
				r.Header.Add(api.HeaderUnansweredFor, v)
			}
			got, waited, ok := parseUnanswered(r.Header)
			if ok != tc.allowed || ok && (got != tc.u[0] || waited != tc.waited) {
				t.Errorf("parseUnanswered = %q, %v, %v; want ok %v, %v", got, waited, ok, tc.allowed, tc.waited)
			}
			if ctx := unansweredContext(r); !tc.allowed && ctx != r.Context() {
				t.Error("an ignored word changed the request's context")
			}
		})
	}
}
