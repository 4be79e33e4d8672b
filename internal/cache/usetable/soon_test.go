package usetable

import (
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/jobstream"
)

// TestSoon: the chunks a followed stream needs from its current window to
// ahead windows past it, crossing into the next epoch, of those asked
// about; none of another dataset version, and none with no stream.
func TestSoon(t *testing.T) {
	ds := catalog.NewDataset("d", "", nil, testIndex(t, 16, 32)) // 16 chunks, 8 windows of 2
	other := catalog.NewDataset("d", "", nil, testIndex(t, 12, 32))
	js := jobstream.Stream{DS: ds, Seed: 9, Window: 2}
	all := make([]int, 16)
	for c := range all {
		all[c] = c
	}
	windows := func(t *testing.T, s *Table, ws ...[2]int) []int { // (epoch, window)
		var want []int
		for _, w := range ws {
			e, err := s.orders.Epoch(js, uint64(w[0]))
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, e.WindowChunks(w[1])...)
		}
		slices.Sort(want)
		return slices.Compact(want)
	}
	tests := []struct {
		name  string
		at    *epochPos // the stream's edge; nil: no stream
		ds    *catalog.Dataset
		ask   []int
		ahead int
		want  [][2]int // the windows whose chunks are soon needed
		none  bool
	}{
		{name: "no stream", ds: ds, ask: all, ahead: 1, none: true},
		{name: "the current window", at: &epochPos{0, 10}, ds: ds, ask: all, ahead: 0, want: [][2]int{{0, 0}}},
		{name: "and the next", at: &epochPos{0, 10}, ds: ds, ask: all, ahead: 1, want: [][2]int{{0, 0}, {0, 1}}},
		{name: "into the next epoch", at: &epochPos{0, 500}, ds: ds, ask: all, ahead: 1, want: [][2]int{{0, 7}, {1, 0}}},
		{name: "another version", at: &epochPos{0, 10}, ds: other, ask: all[:12], ahead: 1, none: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSchedule()
			if tc.at != nil {
				s.advance(js, tc.at.epoch, tc.at.pos)
			}
			got := s.Soon(tc.ds, tc.ask, tc.ahead)
			slices.Sort(got)
			if tc.none {
				if len(got) != 0 {
					t.Fatalf("Soon = %v, want none", got)
				}
				return
			}
			if want := windows(t, s, tc.want...); !slices.Equal(got, want) {
				t.Fatalf("Soon = %v, want %v", got, want)
			}
			// Asked about some chunks, it names only those.
			half := all[:8]
			var want []int
			for _, c := range got {
				if c < 8 {
					want = append(want, c)
				}
			}
			part := s.Soon(tc.ds, half, tc.ahead)
			slices.Sort(part)
			if !slices.Equal(part, want) {
				t.Fatalf("Soon of chunks 0-7 = %v, want %v", part, want)
			}
		})
	}
}
