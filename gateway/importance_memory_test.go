package gateway_test

import (
	"bytes"
	"fmt"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// jsonFeedback is a JSON feedback body of n records over a dataset of
// samples: IDs cycling through it, losses of one digit.
func jsonFeedback(n, samples int) []byte {
	ids, losses := make([]string, n), make([]string, n)
	for i := range n {
		ids[i], losses[i] = strconv.Itoa(i%samples), strconv.Itoa(i%10)
	}
	return fmt.Appendf(nil, `{"ids":[%s],"losses":[%s]}`, strings.Join(ids, ","), strings.Join(losses, ","))
}

// heapPeak samples the heap's objects, live and not yet swept, while run
// runs, and returns the most above what it held before. Garbage counts,
// as it does for the process: a decoder that made a little of it for
// every record would grow the heap to the collector's goal, twice what
// the records hold (internal/feedback's TestDecodeAllocations says where).
// The bodies are made before, and the client's transport streams them.
func heapPeak(run func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	runtime.GC()
	runtime.GC() // twice: a sync.Pool's blocks survive one collection
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if h := read(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	run()
	close(done)
	<-stopped
	return max(peak.Load(), base) - base
}

// TestImportanceFeedbackMemory: a feedback body is decoded as it arrives,
// holding 8 bytes a record, and only a few at once: one 8 MB JSON body
// and 32 of them at once stay within a gateway's means. The figures are
// logged (go test -run FeedbackMemory -v).
func TestImportanceFeedbackMemory(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("measures memory: not under the race detector or -short")
	}
	f := newFixture(t, 8, 8)
	_, srv := start(t, f.store, nil)
	n := f.index.NumSamples()
	postBody := func(job string, body []byte) int {
		resp, err := http.Post(srv.URL+"/importance/"+job+"/feedback?epoch=0", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	million := jsonFeedback(1<<20, n)         // 5 MB
	twoMillion := jsonFeedback(2_000_000, 10) // 8 MB
	tests := []struct {
		name      string
		body      []byte
		at        int
		jobs      int // the bodies go to this many jobs, in turn
		want      int // every status; 0: 200 or 503
		peakBelow uint64
	}{
		{"1M records in one body", million, 1, 1, 200, 24 << 20},
		{"2M records in one body", twoMillion, 1, 1, 400, 24 << 20},
		{"32 bodies of 1M records at once", million, 32, 1, 0, 64 << 20},
		{"32 jobs' bodies at once", million, 32, 32, 0, 64 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			codes := make([]int, tc.at)
			peak := heapPeak(func() {
				var wg sync.WaitGroup
				for i := range tc.at {
					wg.Go(func() { codes[i] = postBody(fmt.Sprintf("mem-%d", i%tc.jobs), tc.body) })
				}
				wg.Wait()
			})
			t.Logf("%d bodies of %.1f MB: heap peak +%.1f MB, statuses %v", tc.at, float64(len(tc.body))/1e6, float64(peak)/(1<<20), codes)
			for _, c := range codes {
				if tc.want != 0 && c != tc.want || tc.want == 0 && c != 200 && c != 503 {
					t.Errorf("statuses %v, want %d", codes, tc.want)
					break
				}
			}
			if peak > tc.peakBelow {
				t.Errorf("the heap grew by %.1f MB, want under %.0f MB", float64(peak)/(1<<20), float64(tc.peakBelow)/(1<<20))
			}
		})
	}
}
