package reqbody_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/server/reqbody"
)

// slack is what a connection's end may take beyond its bound: scheduling
// on a loaded machine under the race detector. No test asserts more
// than "ended within the bound plus slack".
const slack = 3 * time.Second

// trickle is a client sending a request's head and then its body a byte
// at a time, every tick, for as long as the connection lets it.
type trickle struct {
	conn   net.Conn
	start  time.Time
	stop   chan struct{}
	status int // the answer's status; 0 if none came
}

func send(t *testing.T, addr, head string, tick time.Duration) *trickle {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &trickle{conn: conn, start: time.Now(), stop: make(chan struct{})}
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	go func() {
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-tk.C:
				if _, err := conn.Write([]byte{'x'}); err != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(func() { close(c.stop) })
	return c
}

// ended reads the answer and waits for the server to end the connection,
// failing the test if it is still open bound+slack after the request
// began. It returns the answer's status.
func (c *trickle) ended(t *testing.T, bound time.Duration) int {
	t.Helper()
	_ = c.conn.SetReadDeadline(c.start.Add(bound + slack))
	br := bufio.NewReader(c.conn)
	if resp, err := http.ReadResponse(br, nil); err == nil {
		c.status = resp.StatusCode
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	_, err := io.Copy(io.Discard, br)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection was still open %s after the request began (bound %s)", time.Since(c.start).Round(time.Millisecond), bound)
	}
	return c.status
}

// server answers 400 with the error Apply or the body's read returns, and
// 200 with the body's length otherwise.
func server(t *testing.T, b reqbody.Bound, got chan<- error) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := reqbody.Apply(w, r, b)
		defer release()
		var n int
		if err == nil {
			var body []byte
			body, err = io.ReadAll(r.Body)
			n = len(body)
		}
		if got != nil {
			got <- err
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, n)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func post(path, hdr string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: x\r\n" + hdr + "\r\n"
}

// TestSlowBodyEndsAtItsDeadline: a body declared at 400 bytes and sent a
// byte every 50 ms would take 20 s; the read fails at the deadline and
// the connection ends.
func TestSlowBodyEndsAtItsDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	got := make(chan error, 1)
	srv := server(t, reqbody.Bound{Bytes: 1000, Timeout: timeout}, got)
	c := send(t, srv.Listener.Addr().String(), post("/", "Content-Length: 400\r\n"), 50*time.Millisecond)
	if status := c.ended(t, timeout); status != http.StatusBadRequest {
		t.Errorf("status %d; want 400", status)
	}
	if err := <-got; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the body's read: %v; want its deadline", err)
	}
}

// TestDeclaredLengthOverTheBound: refused before a byte is read, the
// connection closed while the client still sends.
func TestDeclaredLengthOverTheBound(t *testing.T) {
	got := make(chan error, 1)
	srv := server(t, reqbody.Bound{Bytes: 1000, Timeout: time.Minute}, got)
	c := send(t, srv.Listener.Addr().String(), post("/", "Content-Length: 4194304\r\n"), 50*time.Millisecond)
	if status := c.ended(t, 0); status != http.StatusBadRequest {
		t.Errorf("status %d; want 400", status)
	}
	if err := <-got; !errors.Is(err, reqbody.ErrTooLarge) || !strings.Contains(err.Error(), "over 1000 bytes") {
		t.Errorf("%v; want ErrTooLarge naming the bound", err)
	}
}

// TestChunkedBodies: a body without a length is counted as it is read:
// refused at the first byte past the bound; on a route that takes no
// body, an empty one passes and any byte is refused.
func TestChunkedBodies(t *testing.T) {
	tests := []struct {
		name  string
		bound int64
		body  int
		want  int
	}{
		{"at the bound", 100, 100, http.StatusOK},
		{"one past the bound", 100, 101, http.StatusBadRequest},
		{"empty where none is taken", 0, 0, http.StatusOK},
		{"a byte where none is taken", 0, 1, http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan error, 1)
			srv := server(t, reqbody.Bound{Bytes: tc.bound, Timeout: time.Minute}, got)
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(strings.Repeat("a", tc.body)))
			req.ContentLength = -1 // sent chunked
			req.TransferEncoding = []string{"chunked"}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d; want %d", resp.StatusCode, tc.want)
			}
			if err := <-got; tc.want != http.StatusOK && !errors.Is(err, reqbody.ErrTooLarge) {
				t.Errorf("%v; want ErrTooLarge", err)
			}
		})
	}
}

// TestDeadlineLiftedAtTheBodysEnd: once the body is read, no deadline of
// it cuts the connection: a handler that answers after it would have
// passed keeps its request's context, its answer arrives, and the
// connection serves the next request.
func TestDeadlineLiftedAtTheBodysEnd(t *testing.T) {
	const timeout = 100 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := reqbody.Apply(w, r, reqbody.Bound{Bytes: 100, Timeout: timeout}); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(4 * timeout):
		case <-r.Context().Done():
			http.Error(w, fmt.Sprint("the request's context ended: ", r.Context().Err()), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	for i := range 2 {
		resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("twelve bytes"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %s: %s", i, resp.Status, b)
		}
	}
}

// TestRefuseAnswersUnread: a request refused before its body is read (a
// missing credential) is answered while its client is still sending, and
// its connection closed within the linger, not when the body ends.
func TestRefuseAnswersUnread(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqbody.Refuse(w, r)
		http.Error(w, "no credential", http.StatusUnauthorized)
	}))
	defer srv.Close()
	c := send(t, srv.Listener.Addr().String(), post("/", "Content-Length: 400\r\n"), 50*time.Millisecond)
	if status := c.ended(t, 0); status != http.StatusUnauthorized {
		t.Errorf("status %d; want 401", status)
	}
}
