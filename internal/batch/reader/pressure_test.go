package reader

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/memory"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// TestSlowReaderGivesItsPinsBack: a batch written from pinned chunks to a
// client that stops reading, while the cache is under pressure (the batch
// pins over half of it), is copied out mid-write by the writer
// (Result.Relieve, asked when the memory manager's UnderPressure says so) and its chunks go back to the
// cache long before its write deadline; the client, reading again, gets
// every byte, in order. A batch read at once is written from the cache,
// not copied.
func TestSlowReaderGivesItsPinsBack(t *testing.T) {
	const chunkBytes = 1 << 20
	ds := catalogtest.Dataset(t, "d", 16, chunkBytes/sampleSize) // 16 chunks of 1 MiB
	r, cache, reg := newReader(t, 24*chunkBytes, &store{}, false)
	var all [][2]int
	for id := range ds.Index.NumSamples() {
		all = append(all, [2]int{0, id})
	}
	mem := memory.New(memory.Config{MaxWait: time.Second, Busy: chunkcache.ErrBusy})
	mem.Watch(cache)
	// A fast read here is the test's own, on a machine that may run other
	// packages' tests beside it: with the default bound of 100 ms a
	// segment, at a load average of 8 on two cores, each of three reads
	// was stalled past it and copied (two runs of the suite beside other
	// work). A second is past any stall of a running reader and far
	// below the stalled one's wait below; what is tested is the rule, not
	// the bound.
	out := respond.New(respond.Config{Pressure: mem.UnderPressure, SlowWrite: time.Second, WriteTimeout: 5 * time.Minute}) // the pins must go back long before this
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		res, err := r.ReadBatch(req.Context(), batchOf([]*catalog.Dataset{ds}, all))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer res.Release()
		_, _ = out.Write(w, req, "application/octet-stream", respond.Payload{Parts: res.Parts, N: res.Bytes, Relieve: res.Relieve})
	}))
	defer srv.Close()
	var whole []byte // the chunks back to back: the batch serves every sample in order
	for c := range ds.Index.NumChunks() {
		buf := make([]byte, ds.Index.Chunk(c).Size)
		fill(ds.ChunkKey(c), buf)
		whole = append(whole, buf...)
	}
	if !bytes.Equal(whole[:sampleSize], want(ds, 0)) {
		t.Fatal("the batch's bytes are not its samples'")
	}
	copied := func() float64 { return testutil.ToFloat64(r.copied) }
	// A reader that the machine stalls for over the writer's slow-write
	// bound (the race detector beside other packages' tests on two cores)
	// is, rightly, copied: of three fast reads, one must not be.
	before := 0.0
	for try := 0; ; try++ {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, resp.ContentLength)
		_, err = io.ReadFull(resp.Body, b)
		resp.Body.Close()
		if err != nil || !bytes.Equal(b, whole) {
			t.Fatalf("a batch read at once: %v, %d bytes", err, len(b))
		}
		if copied() == before {
			break
		}
		if before = copied(); try == 2 {
			t.Fatalf("three batches read at once were each copied out (%v)", before)
		}
	}
	// A client that sends its request and reads nothing yet: the 16 MiB
	// batch is more than the sockets' buffers hold (its receive buffer
	// fixed at 1 MiB: Linux grows one up to tcp_rmem's maximum, which
	// would take the whole batch in).
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.(*net.TCPConn).SetReadBuffer(1 << 20); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	for deadline := time.Now().Add(30 * time.Second); copied() != before+1 || cache.Stats().Pinned != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a stalled reader under pressure still pins its chunks: %d pinned, %v copied", cache.Stats().Pinned, copied()-before)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, whole) {
		t.Fatalf("the resumed body (%d bytes) differs from the batch (%d bytes)", len(got), len(whole))
	}
	if n, _ := testutil.GatherAndCount(reg, "brand_batches_copied_total"); n != 1 {
		t.Errorf("brand_batches_copied_total: %d series", n)
	}
}
