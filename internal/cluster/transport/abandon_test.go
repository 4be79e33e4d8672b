package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestAGivenUpRequestIsNeverDelivered: a request this node gave up
// before the peer had taken all of it is not delivered later. Bytes the
// peer has not acknowledged when the asker ends the request (a link cut
// one way, or a peer too slow to read) are dropped with the connection,
// not sent after it: were they, the peer would read the whole request
// once the link came back, serve a fetch nobody waits for, and read the
// store for it (the partition suite's warm epoch after a one-way cut).
//
// The peer here is a listener that does not read until the asker has
// given up, so that the request, larger than the sockets' buffers, waits
// in the asker's send queue as it would behind a cut; then it reads all
// it is sent. Before the fix it read the whole request, then the FIN.
func TestAGivenUpRequestIsNeverDelivered(t *testing.T) {
	// A peer whose receive buffer is small, so that most of the request
	// waits in the asker's send queue, unacknowledged, as behind a cut.
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		return errors.Join(err, serr)
	}}
	l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	gaveUp := make(chan struct{})
	got := make(chan int64, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer conn.Close()
		<-gaveUp
		n, _ := io.Copy(io.Discard, conn) // to the FIN, or the reset
		got <- n
	}()

	body := make([]byte, 12<<10) // past the peer's window, inside the asker's send buffer
	c := newTransport(Config{Self: "http://127.0.0.1:1", Timeout: time.Minute}).to("http://" + l.Addr().String())
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = c.call(ctx, request{method: http.MethodPost, path: SamplesPath, body: body}, func(*http.Response) error { return nil })
	if !errors.Is(err, errGaveUp) {
		t.Fatalf("the request ended with %v, want the asker giving up", err)
	}
	close(gaveUp)
	select {
	case n := <-got:
		if n >= int64(len(body)) {
			t.Fatalf("the peer read %d bytes after the asker gave up, the whole request (body %d): a given-up request was delivered", n, len(body))
		}
		t.Logf("the peer read %d of the request's %d bytes after the asker gave up", n, len(body))
	case <-time.After(30 * time.Second):
		t.Fatal("the peer's connection neither ended nor was reset")
	}
}
