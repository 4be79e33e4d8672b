package planner

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// referenceTrace computes the demand trace the slow, obvious way: every
// rank's batch from shuffle.Epoch.Batch, a linear scan for each sample's
// chunk, a set for each global batch's distinct chunks.
func referenceTrace(t *testing.T, d Dataset, j Job) []Access {
	t.Helper()
	chunkOf := func(id int) int32 {
		first := 0
		for c, k := range d.Counts {
			if id < first+k {
				return int32(c)
			}
			first += k
		}
		t.Fatalf("sample %d beyond the dataset", id)
		return -1
	}
	var out []Access
	for e := j.FirstEpoch; e < j.FirstEpoch+j.Epochs; e++ {
		ep, err := shuffle.NewEpoch(d.Counts, j.Seed, uint64(e), j.Window)
		if err != nil {
			t.Fatal(err)
		}
		nb := shuffle.NumBatches(ep.NumSamples(), j.BatchSize, j.World, j.DropLast)
		for m := range nb {
			seen := map[int32]bool{}
			for r := range j.World {
				ids, err := ep.Batch(m, j.BatchSize, j.World, r, j.DropLast)
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range ids {
					if c := chunkOf(id); !seen[c] {
						out = append(out, Access{Chunk: c, Epoch: int32(e), Start: len(seen) == 0})
						seen[c] = true
					}
				}
			}
		}
	}
	return out
}

func TestTraceMatchesShuffle(t *testing.T) {
	datasets := map[string]Dataset{
		"equal":      {ChunkSizes: equalSizes(12, 100), Counts: []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}},
		"uneven":     {ChunkSizes: []int64{5, 9, 1, 0, 7, 3, 8}, Counts: []int{7, 1, 13, 0, 4, 9, 2}},
		"one chunk":  {ChunkSizes: []int64{42}, Counts: []int{17}},
		"empty head": {ChunkSizes: []int64{1, 1, 1, 1}, Counts: []int{0, 0, 5, 6}},
	}
	jobs := []Job{
		{Params: shuffle.Params{Seed: 1, Window: 1, BatchSize: 4, World: 1}, Epochs: 2},
		{Params: shuffle.Params{Seed: 2, Window: 3, BatchSize: 5, World: 3}, FirstEpoch: 7, Epochs: 3},
		{Params: shuffle.Params{Seed: 3, Window: 3, BatchSize: 5, World: 3, DropLast: true}, Epochs: 2},
		{Params: shuffle.Params{Seed: 4, Window: 100, BatchSize: 8, World: 2, DropLast: true}, FirstEpoch: 1, Epochs: 2},
		{Params: shuffle.Params{Seed: 5, Window: 2, BatchSize: 1, World: 1}, Epochs: 1},
		{Params: shuffle.Params{Seed: 6, Window: 4, BatchSize: 64, World: 4}, Epochs: 2}, // one batch per epoch
	}
	for name, d := range datasets {
		for _, j := range jobs {
			t.Run(fmt.Sprintf("%s/%+v", name, j), func(t *testing.T) {
				got, err := Trace(d, j)
				if err != nil {
					t.Fatal(err)
				}
				want := referenceTrace(t, d, j)
				if !slices.Equal(got, want) {
					t.Errorf("Trace =\n%v\nwant\n%v", got, want)
				}
			})
		}
	}
}

// TestChunkOf checks the bucketed lookup against a linear scan on counts
// with empty chunks at either end, skew, and averages below one sample.
func TestChunkOf(t *testing.T) {
	for _, counts := range [][]int{
		{1},
		{5},
		{0, 0, 3, 0},
		{1, 0, 0, 0, 0, 0, 0, 1},
		{1000, 1, 1, 1, 1, 0, 1, 2, 3},
		{1, 2, 3, 500, 0, 0, 7, 64, 63, 65, 0},
		{7, 7, 7, 7, 7, 7, 7},
		{16, 16, 16, 16},
		{17, 15, 16, 16, 1, 31},
	} {
		s, err := newSchedule(Dataset{ChunkSizes: make([]int64, len(counts)), Counts: counts}, Job{Params: shuffle.Params{Window: 1, BatchSize: 1, World: 1}, Epochs: 1})
		if err != nil {
			t.Fatal(err)
		}
		id := 0
		for c, k := range counts {
			for range k {
				if got := s.chunkOf(id); got != int32(c) {
					t.Errorf("counts %v: chunkOf(%d) = %d, want %d", counts, id, got, c)
				}
				id++
			}
		}
	}
}

func TestTraceNoBatches(t *testing.T) {
	d := Dataset{ChunkSizes: []int64{1, 1}, Counts: []int{3, 4}}
	tr, err := Trace(d, Job{Params: shuffle.Params{Window: 1, BatchSize: 4, World: 2, DropLast: true}, Epochs: 2})
	if err != nil || len(tr) != 0 {
		t.Errorf("7 samples, global batch 8, drop_last: Trace = %v, %v; want empty, nil", tr, err)
	}
}

func TestTraceInvalid(t *testing.T) {
	good := Dataset{ChunkSizes: []int64{1, 2}, Counts: []int{3, 4}}
	job := Job{Params: shuffle.Params{Window: 1, BatchSize: 2, World: 1}, Epochs: 1}
	tests := []struct {
		name string
		d    Dataset
		j    func(j *Job)
	}{
		{"no chunks", Dataset{}, nil},
		{"length mismatch", Dataset{ChunkSizes: []int64{1}, Counts: []int{1, 2}}, nil},
		{"negative size", Dataset{ChunkSizes: []int64{1, -2}, Counts: []int{1, 2}}, nil},
		{"negative count", Dataset{ChunkSizes: []int64{1, 2}, Counts: []int{1, -2}}, nil},
		{"no samples", Dataset{ChunkSizes: []int64{1, 2}, Counts: []int{0, 0}}, nil},
		{"bytes overflow", Dataset{ChunkSizes: []int64{math.MaxInt64, 1}, Counts: []int{1, 1}}, nil},
		{"samples overflow", Dataset{ChunkSizes: []int64{1, 1}, Counts: []int{math.MaxInt, 1}}, nil},
		{"window", good, func(j *Job) { j.Window = 0 }},
		{"batch size", good, func(j *Job) { j.BatchSize = 0 }},
		{"world", good, func(j *Job) { j.World = -1 }},
		{"batch overflow", good, func(j *Job) { j.BatchSize, j.World = math.MaxInt/2, 3 }},
		{"first epoch", good, func(j *Job) { j.FirstEpoch = -1 }},
		{"epochs", good, func(j *Job) { j.Epochs = 0 }},
		{"epoch overflow", good, func(j *Job) { j.FirstEpoch, j.Epochs = math.MaxInt32, 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := job
			if tt.j != nil {
				tt.j(&j)
			}
			if _, err := Trace(tt.d, j); !errors.Is(err, ErrInvalid) {
				t.Errorf("Trace error %v, want ErrInvalid", err)
			}
		})
	}
	// The last epoch allowed: the one after it is still an int32.
	if _, err := Trace(good, Job{Params: shuffle.Params{Window: 1, BatchSize: 2, World: 1}, FirstEpoch: math.MaxInt32 - 2, Epochs: 2}); err != nil {
		t.Errorf("epochs up to MaxInt32-1: %v", err)
	}
}
