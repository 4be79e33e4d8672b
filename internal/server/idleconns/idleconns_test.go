package idleconns_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/server/idleconns"
)

// TestIdleConnectionsPastTheCap: connections left idle past the cap
// are closed, the one idle longest first, and those within it kept and
// served again; with no cap none is closed. The reproduction (issue 98,
// item 15): a server kept every idle connection until its idle timeout.
func TestIdleConnectionsPastTheCap(t *testing.T) {
	tests := []struct {
		name       string
		max, conns int
		wantClosed int // the first wantClosed opened
	}{
		{"within the cap", 4, 4, 0},
		{"past it", 2, 5, 3},
		{"a cap of one", 1, 3, 2},
		{"no cap", 0, 6, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "ok")
			}))
			limit := idleconns.New(tt.max)
			limit.Serve(srv.Config)
			srv.Start()
			defer srv.Close()
			conns := make([]net.Conn, tt.conns)
			readers := make([]*bufio.Reader, tt.conns)
			ask := func(i int) error {
				if _, err := fmt.Fprintf(conns[i], "GET / HTTP/1.1\r\nHost: brand\r\n\r\n"); err != nil {
					return err
				}
				resp, err := http.ReadResponse(readers[i], nil)
				if err != nil {
					return err
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				return resp.Body.Close()
			}
			for i := range conns {
				c, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conns[i], readers[i] = c, bufio.NewReader(c)
				if err := ask(i); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				// Idle (the server's hook runs once the answer is
				// written) before the next is opened, so that the order
				// they went idle in is the order they were opened in:
				// past the cap, the idle count stays at the cap, and
				// the one closed for it says this one went idle.
				want, closed := i+1, 0
				if tt.max > 0 {
					want, closed = min(want, tt.max), max(0, i+1-tt.max)
				}
				waitFor(t, func() bool { return limit.Idle() == want && limit.Closed() == int64(closed) })
			}
			for i, c := range conns {
				_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				_, err := readers[i].ReadByte()
				closed := err == io.EOF || err != nil && !isTimeout(err)
				if want := i < tt.wantClosed; closed != want {
					t.Errorf("connection %d (of %d, cap %d): closed %v (%v), want %v", i, tt.conns, tt.max, closed, err, want)
				}
				if !closed {
					_ = c.SetReadDeadline(time.Time{})
					if err := ask(i); err != nil {
						t.Errorf("connection %d kept, but not served again: %v", i, err)
					}
				}
			}
		})
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(end) {
			t.Fatal("the connection did not go idle within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
