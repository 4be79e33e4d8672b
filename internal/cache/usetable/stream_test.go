package usetable

import (
	"testing"
	"time"

	"github.com/brandgw/brand/internal/job/jobstream"
)

// TestStreamsBounded: a flood of job streams costs the schedule a bounded
// amount, whoever sends it. The reproduction: 400 requests of distinct
// seeds made a normal client's epoch 29 times slower for two minutes, as
// every rebuild and every hot chunk's key cost work per stream ever seen,
// and rebuilds recomputed the orders the shared memo (64 epochs) had
// dropped. (gateway's TestSeedFloodLeavesOthersAlone measured that on the
// process's CPU time; this measures what bounds it.) After a flood the
// schedule follows at most maxStreams streams, those seen last, the
// normal job's among them; a chunk's key reads at most that many clocks;
// the normal stream still holds its orders, so its rebuilds compute none;
// and streams silent for longer than streamIdle are forgotten.
func TestStreamsBounded(t *testing.T) {
	tests := []struct {
		name  string
		flood int  // streams of distinct seeds, one batch each
		idle  bool // the flood then sends nothing for longer than streamIdle
		want  int  // the streams followed after it, the normal job's among them
	}{
		{"a few other jobs", 10, false, 11},
		{"a flood of seeds", 400, false, maxStreams},
		{"a flood gone silent", 400, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClocked(t, 1<<40, 0)
			// Each request a millisecond after the last: which stream
			// was seen longest ago is never a tie.
			read := func(js jobstream.Stream, pos int) {
				c.tick(time.Millisecond)
				c.Finish(c.batch(t, js, pos))
			}
			normal := c.stream(1, 2)
			read(normal, 0)
			held, err := c.orders.Epoch(normal, 0)
			if err != nil {
				t.Fatal(err)
			}
			pos := 0
			for i := range tc.flood {
				// A flood stream's window is the whole dataset, so every
				// chunk is hot for each of them.
				read(c.stream(uint64(1000+i), 16), 0)
				if i%40 == 39 { // the normal job reads on meanwhile
					pos += 32
					read(normal, pos)
				}
			}
			if tc.idle {
				c.tick(streamIdle + time.Second)
				read(normal, pos+32)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			st, ok := c.streams[normal]
			if len(c.streams) != tc.want || !ok {
				t.Fatalf("%d streams followed, the normal job's among them: %t; want %d", len(c.streams), ok, tc.want)
			}
			// Every stream followed is in a window of the normal job's
			// chunks: that many clocks, no more.
			most := 0
			for _, clocks := range c.Snapshot().clocks {
				most = max(most, len(clocks))
			}
			if most != tc.want {
				t.Errorf("a hot chunk's key reads %d clocks, want %d", most, tc.want)
			}
			if e, err := st.order(c.orders, 0); err != nil || e != held {
				t.Errorf("the normal stream's epoch 0 was computed again (%v): its rebuilds recompute orders", err)
			}
			// The memo holds 64 epochs; the flood's streams each read two.
			if e, _ := c.orders.Epoch(normal, 0); tc.flood > maxStreams && e == held {
				t.Fatal("the memo still holds the normal stream's epoch 0: the flood tests nothing")
			}
		})
	}
}
