package gateway_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/gateway"
)

// TestStalledReaderDoesNotStallOthers is the reproduction of one client
// stalling all others: a client asks for a batch whose chunks fill most of
// the cache and stops reading. Its chunks used to stay pinned until its
// last byte was sent, and every other batch waited for as long as it
// stayed connected. Eight normal clients' batch latency (p99) beside it
// must stay within 2× of what it is without it, measured side by side.
func TestStalledReaderDoesNotStallOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("measures latency over a few hundred requests")
	}
	const chunkBytes = 1 << 20
	f := newFixtureSized(t, 32, 16, chunkBytes/16) // 32 chunks of about 1 MiB
	_, srv := start(t, f.store, func(c *gateway.Config) {
		c.CacheSize = 17 * chunkBytes
		c.Defaults = gateway.Defaults{BatchSize: 4, Window: 2, Seed: 1}
	})
	normal := func() time.Duration {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		for r := range 8 {
			wg.Go(func() {
				for m := range (32*16 + 31) / 32 {
					start := time.Now()
					resp, err := http.Get(fmt.Sprintf("%s/epoch/0/batch/%d?world=8&rank=%d", srv.URL, m, r))
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Errorf("batch %d rank %d: %d", m, r, resp.StatusCode)
					}
					mu.Lock()
					lat = append(lat, time.Since(start))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.Sort(lat)
		return lat[len(lat)*99/100]
	}
	// stall sends a request for a batch spanning 16 chunks (16 MiB) and
	// reads only its status line, with a small receive buffer, so that
	// the gateway's write blocks; it returns the connection to close.
	stall := func() net.Conn {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(conn, "GET /epoch/0/batch/0?seed=99&window=16&batch_size=256 HTTP/1.1\r\nHost: x\r\n\r\n")
		buf := make([]byte, 12)
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "HTTP/1.1 200" {
			t.Fatalf("stalled request: %q %v", buf, err)
		}
		return conn
	}
	normal() // warm: the normal job's chunks resident
	var alone, beside []time.Duration
	for range 3 {
		alone = append(alone, normal())
		conn := stall()
		beside = append(beside, normal())
		conn.Close()
	}
	a, b := slices.Min(alone), slices.Min(beside)
	t.Logf("p99 batch latency of 8 clients: alone %v, beside a stalled reader %v", alone, beside)
	// The best of three rounds each, and 10 ms of slack: latencies are a
	// few milliseconds, and a shared test machine adds that much noise.
	if b > 2*a+10*time.Millisecond {
		t.Errorf("p99 %v beside a stalled reader, %v without: more than 2×", b, a)
	}
}

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
