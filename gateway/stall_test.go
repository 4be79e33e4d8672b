package gateway_test

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/gateway/gatewaytest"
)

// stalledConn sends the requests in paths on one connection with a small
// receive buffer and reads only the first response's status line: the
// gateway's writes block as a client that stopped reading makes them.
func stalledConn(t *testing.T, base string, paths ...string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	for _, p := range paths {
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", p)
	}
	buf := make([]byte, 12)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "HTTP/1.1 200" {
		t.Fatalf("stalled request: %q %v", buf, err)
	}
	return conn
}

// waitFor is gatewaytest.WaitFor.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	gatewaytest.WaitFor(t, d, what, cond)
}

// TestStalledReadersReleaseTheirChunks: a sample (GET /samples/{key})
// and a batch are written under write deadlines, so a client that stops
// reading holds their chunks pinned only until its deadline. The
// reproduction: a client that stopped reading a sample of a 15 MB chunk
// held the chunk pinned for all 330 s observed, and three such clients
// stalled everyone else. (A batch assembled in parts holds room to
// assemble only while it copies: internal/batch/reader's
// TestAssembledReadsHoldNoRoom.)
func TestStalledReadersReleaseTheirChunks(t *testing.T) {
	f := newFixtureNamed(t, t.TempDir(), "", 2, 16, (1<<20)/16) // chunks of about 1 MiB
	g, srv := start(t, f.store, func(c *gateway.Config) {
		c.WriteTimeout = 300 * time.Millisecond
		c.MinWriteRate = 1 << 40 // a segment's deadline is the timeout alone
	})
	for _, tc := range []struct {
		name, path string
		n          int // requests sent: more than the sockets' buffers hold
	}{
		{"a sample", "/samples/" + f.index.SampleKey(0), 200},
		{"a batch", "/epoch/0/batch/0?batch_size=32", 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stalledConn(t, srv.URL, slices.Repeat([]string{tc.path}, tc.n)...)
			waitFor(t, 5*time.Second, "a stalled reader still pins its chunks", func() bool {
				return g.Cache().Stats().Pinned == 0
			})
		})
	}
}
