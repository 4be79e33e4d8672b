package feedback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/server/memory"
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
// the records hold (TestDecodeAllocations says where). The bodies are
// made before.
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

// TestFeedbackMemory: a feedback body is decoded as it is read, holding 8
// bytes a record, and only a few at once: one 8 MB JSON body and 32 of
// them at once stay within a gateway's means; a body over the records'
// bound is refused (a bad request), and a body that finds every decoder
// or every job's slot taken waits its turn or is refused as busy. The
// state takes its blocks from a node's memory manager, as a gateway's
// does. The figures are logged (go test -run FeedbackMemory -v).
func TestFeedbackMemory(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("measures memory: not under the race detector (scripts/test.sh runs it without) or -short")
	}
	ds := storedDataset(t, 64)
	mem := memory.New(memory.Config{MaxWait: time.Second})
	s := NewWith(Config{Log: zerolog.Nop(), Buffers: mem})
	million := jsonFeedback(1<<20, 64)        // 5 MB
	twoMillion := jsonFeedback(2_000_000, 10) // 8 MB
	tests := []struct {
		name      string
		body      []byte
		at        int
		jobs      int   // the bodies go to this many jobs, in turn
		want      error // every body's; nil: accepted, or refused as busy
		peakBelow uint64
	}{
		{"1M records in one body", million, 1, 1, nil, 24 << 20},
		{"2M records in one body", twoMillion, 1, 1, ErrBadFeedback, 24 << 20},
		{"32 bodies of 1M records at once", million, 32, 1, nil, 64 << 20},
		{"32 jobs' bodies at once", million, 32, 32, nil, 64 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := make([]error, tc.at)
			peak := heapPeak(func() {
				var wg sync.WaitGroup
				for i := range tc.at {
					wg.Go(func() {
						_, errs[i] = s.Add(context.Background(), ds, fmt.Sprintf("mem-%d", i%tc.jobs), 0, "application/json", bytes.NewReader(tc.body))
					})
				}
				wg.Wait()
			})
			busy := 0
			for _, err := range errs {
				switch {
				case tc.want != nil && !errors.Is(err, tc.want):
					t.Errorf("%v, want %v", err, tc.want)
				case tc.want == nil && errors.Is(err, ErrBusy):
					busy++
				case tc.want == nil && err != nil:
					t.Errorf("%v, want the body accepted or refused as busy", err)
				}
			}
			t.Logf("%d bodies of %.1f MB: heap peak +%.1f MB, %d refused as busy", tc.at, float64(len(tc.body))/1e6, float64(peak)/(1<<20), busy)
			if peak > tc.peakBelow {
				t.Errorf("the heap grew by %.1f MB, want under %.0f MB", float64(peak)/(1<<20), float64(tc.peakBelow)/(1<<20))
			}
		})
	}
}
