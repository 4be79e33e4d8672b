package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestImportanceContract: the statuses the importance endpoints answer
// the state's refusals with (package feedback tests the bounds
// themselves): a job past the job slots 503 with Retry-After and why, an
// epoch with no feedback 409 and why, feedback for a sealed epoch 409; a
// seal 200 naming the samples reported.
func TestImportanceContract(t *testing.T) {
	f := newFixture(t, 8, 8)
	_, srv := start(t, f.store, nil)
	feedEpoch(t, srv.URL, f, "victim", 0)
	busy := 0
	for i := range 40 {
		resp, body := post(t, fmt.Sprintf("%s/importance/other-%d/feedback?epoch=0", srv.URL, i), "application/json", []byte(`{"ids":[1],"losses":[1]}`))
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "job") {
				t.Errorf("job %d refused without Retry-After or a message: %s", i, body)
			}
			busy++
		default:
			t.Fatalf("job %d: %s: %s", i, resp.Status, body)
		}
	}
	if busy == 0 {
		t.Error("no job refused past the job slots")
	}
	if s := seal(t, srv.URL, "victim", 0, ""); s.Reported != f.index.NumSamples() {
		t.Errorf("seal: %+v, want %d reported", s, f.index.NumSamples())
	}
	for _, tc := range []struct {
		name, url, ctype, body string
		status                 int
		says                   string
	}{
		{"seal without feedback", "/importance/nobody/seal?epoch=0", "", "", http.StatusConflict, "no feedback"},
		{"feedback after the seal", "/importance/victim/feedback?epoch=0", "application/json", `{"ids":[1],"losses":[1]}`, http.StatusConflict, "sealed"},
	} {
		resp, body := post(t, srv.URL+tc.url, tc.ctype, []byte(tc.body))
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s: %s: %s; want %d and %q", tc.name, resp.Status, body, tc.status, tc.says)
		}
	}
}
