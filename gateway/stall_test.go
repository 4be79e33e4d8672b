package gateway_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/gateway"
)

// TestWriteDeadlineDoesNotOutliveItsResponse: a batch's write deadline is
// set on the connection; the next request on the same keep-alive
// connection, after the deadline has passed, must still be answered.
func TestWriteDeadlineDoesNotOutliveItsResponse(t *testing.T) {
	f := newFixture(t, 2, 4)
	_, srv := start(t, f.store, func(c *gateway.Config) {
		c.WriteTimeout = 50 * time.Millisecond
		c.MinWriteRate = 1 << 40
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}}
	for i, path := range []string{"/epoch/0/batch/0", "/epoch/0", "/epoch/0/batch/1?batch_size=4", "/datasets"} {
		if i > 0 {
			time.Sleep(150 * time.Millisecond) // past the last batch's deadline
		}
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("request %d, %s, on the kept-alive connection: %v", i, path, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("request %d, %s: %d, %v", i, path, resp.StatusCode, err)
		}
	}
}

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

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStalledSampleReaderReleasesItsChunk: GET /samples/{key} is written
// under the same write deadlines as a batch. The reproduction: a client
// that stopped reading a sample of a 15 MB chunk held the chunk pinned for
// all 330 s observed, and three such clients stalled everyone else.
func TestStalledSampleReaderReleasesItsChunk(t *testing.T) {
	f := newFixtureSized(t, 2, 16, (1<<20)/16) // chunks of about 1 MiB
	g, srv := start(t, f.store, func(c *gateway.Config) {
		c.WriteTimeout = 300 * time.Millisecond
	})
	key := f.index.SampleKey(0)
	var paths []string
	for range 200 { // more than the socket buffers hold
		paths = append(paths, "/samples/"+key)
	}
	stalledConn(t, srv.URL, paths...)
	waitFor(t, 5*time.Second, "a stalled /samples reader still pins its chunk", func() bool {
		return g.Cache().Stats().Pinned == 0
	})
}

// TestStalledAssembledReadersDoNotBlockOthers: a batch assembled in parts
// gives up its turn to assemble once its bytes are copied out, and its
// write is bounded like any other. The reproduction: two clients that
// never read assembled batches (of 2,000 samples, window 8) held both
// assembly slots while their responses were written, and 8 other
// requests timed out at 60 s.
func TestStalledAssembledReadersDoNotBlockOthers(t *testing.T) {
	const chunkBytes = 1 << 20
	f := newFixtureSized(t, 32, 16, chunkBytes/16)
	_, srv := start(t, f.store, func(c *gateway.Config) {
		c.CacheSize = 6 * chunkBytes // batches of 8 chunks are assembled in parts
		c.Defaults = gateway.Defaults{BatchSize: 128, Window: 8, Seed: 1}
		c.PrefetchConcurrency = -1
	})
	stalledConn(t, srv.URL, "/epoch/0/batch/0")
	stalledConn(t, srv.URL, "/epoch/0/batch/1")
	start := time.Now()
	cl := &http.Client{Timeout: 20 * time.Second}
	for m := 2; m < 4; m++ {
		resp, err := cl.Get(fmt.Sprintf("%s/epoch/0/batch/%d", srv.URL, m))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("batch %d: %s", m, resp.Status)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("two batches beside two stalled readers of assembled batches took %v", d)
	}
	if m := scrape(t, srv.URL); !strings.Contains(m, "\nbrand_batches_assembled_in_parts_total 4\n") {
		t.Errorf("the batches were not all assembled in parts:\n%s", grepLines(m, "assembled"))
	}
}
