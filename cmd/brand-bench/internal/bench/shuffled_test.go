package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/chunkindex"
)

// shuffledIndex is an index of chunks of 5, 0, 7 and 3 samples of 512
// bytes each, and the chunks' bytes: sample s's bytes all byte(s).
func shuffledIndex(t *testing.T) (*chunkindex.Index, [][]byte) {
	t.Helper()
	counts := []int{5, 0, 7, 3}
	const size = 512
	var chunks []chunkindex.Chunk
	var samples []chunkindex.Sample
	var bufs [][]byte
	id := 0
	for c, n := range counts {
		buf := make([]byte, 0, size*n)
		for i := range n {
			samples = append(samples, chunkindex.Sample{Key: fmt.Sprintf("s%03d", id), Chunk: c, Offset: int64(size * i), Length: size})
			for range size {
				buf = append(buf, byte(id))
			}
			id++
		}
		chunks = append(chunks, chunkindex.Chunk{Key: fmt.Sprintf("c%d.tar", c), Size: int64(len(buf)), Samples: n})
		bufs = append(bufs, buf)
	}
	ix, err := chunkindex.New(chunks, samples)
	if err != nil {
		t.Fatal(err)
	}
	return ix, bufs
}

// TestShuffledBatches checks limit (b″)'s requests: every sample once, in
// batches of the batch size, a function of the seed, and the memory
// server's answer to each: the samples' bytes in the request's order,
// closed as a tar.
func TestShuffledBatches(t *testing.T) {
	ix, bufs := shuffledIndex(t)
	reqs, err := shuffledBatches(ix, 7, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 4 { // 15 samples in batches of 4
		t.Fatalf("%d requests, want 4: %q", len(reqs), reqs)
	}
	again, _ := shuffledBatches(ix, 7, 2, 4)
	other, _ := shuffledBatches(ix, 8, 2, 4)
	if !slices.Equal(reqs, again) || slices.Equal(reqs, other) {
		t.Errorf("the requests are not a function of the seed: %q, %q, %q", reqs, again, other)
	}
	m := &memServer{ix: ix, bufs: bufs, chunks: map[string]int{}}
	var all []int
	for i, q := range reqs {
		ids := idsOf(t, q)
		if want := min(4, 15-4*i); len(ids) != want {
			t.Errorf("request %d holds %d samples, want %d", i, len(ids), want)
		}
		all = append(all, ids...)
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+q, nil))
		body := rec.Body.Bytes()
		if rec.Code != 200 || len(body) != 512*len(ids)+len(chunkindex.EndOfArchive) {
			t.Fatalf("request %d: %d, %d bytes", i, rec.Code, len(body))
		}
		for j, id := range ids {
			if got := body[512*j : 512*(j+1)]; got[0] != byte(id) || got[511] != byte(id) {
				t.Errorf("request %d, sample %d: bytes of %d, want %d", i, j, got[0], id)
			}
		}
		if h := rec.Header().Get("Content-Length"); h != strconv.Itoa(len(body)) {
			t.Errorf("request %d: Content-Length %s for %d bytes", i, h, len(body))
		}
	}
	slices.Sort(all)
	for i, id := range all {
		if id != i {
			t.Fatalf("the requests do not name every sample once: %v", all)
		}
	}
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+shuffledPath+"?ids=1,15", nil))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("a sample past the last: %d, want 400", rec.Code)
	}
}

func idsOf(t *testing.T, q string) []int {
	t.Helper()
	list, ok := strings.CutPrefix(q, shuffledPath+"?ids=")
	if !ok {
		t.Fatalf("request %q", q)
	}
	var out []int
	for s := range strings.SplitSeq(list, ",") {
		id, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// TestGatewayCPUTargets checks the targets on the server's CPU per GB
// against a limit's: the ratio of the two, PASS at or under the bound,
// and none where either side's CPU was not measured.
func TestGatewayCPUTargets(t *testing.T) {
	row := func(cpu float64, bytes int64) *Row { return &Row{Bytes: bytes, CPU: &CPUUse{Gateway: cpu}} }
	// 0.6 s/GB against 0.5 s/GB: 1.2, over 1.15.
	if tg, ok := gatewayCPUTarget("x", row(0.6, 1e9), row(1.0, 2e9), 1.15); !ok || tg.Status != Miss || tg.Ratio < 1.199 || tg.Ratio > 1.201 {
		t.Errorf("%+v, %v: want a MISS at 1.20", tg, ok)
	}
	if tg, ok := gatewayCPUTarget("x", row(0.55, 1e9), row(1.0, 2e9), 1.15); !ok || tg.Status != Pass || tg.Ratio < 1.099 || tg.Ratio > 1.101 {
		t.Errorf("%+v, %v: want a PASS at 1.10", tg, ok)
	}
	if _, ok := gatewayCPUTarget("x", &Row{Bytes: 1e9}, row(1.0, 2e9), 1.15); ok {
		t.Error("a target without the row's CPU")
	}
	if _, ok := gatewayCPUTarget("x", row(0.5, 1e9), nil, 1.15); ok {
		t.Error("a target without the limit")
	}
}
