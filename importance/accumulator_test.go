package importance

import (
	"errors"
	"math"
	"sync"
	"testing"
)

func TestAccumulatorRejectsBadFeedback(t *testing.T) {
	ds := dataset{"0123456789abcdef", 4}
	tests := []struct {
		name   string
		ids    []int
		losses []float32
	}{
		{"unknown id", []int{0, 4}, []float32{1, 1}},
		{"negative id", []int{-1}, []float32{1}},
		{"NaN", []int{1}, []float32{float32(math.NaN())}},
		{"+Inf", []int{1}, []float32{float32(math.Inf(1))}},
		{"-Inf", []int{1}, []float32{float32(math.Inf(-1))}},
		{"negative", []int{2}, []float32{-0.5}},
		{"more ids", []int{0, 1}, []float32{1}},
		{"more losses", []int{0}, []float32{1, 2}},
		{"bad after good", []int{0, 1, 9}, []float32{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewAccumulator(ds, "job", 3)
			if err != nil {
				t.Fatal(err)
			}
			err = a.Add(tt.ids, tt.losses)
			if !errors.Is(err, ErrBadFeedback) {
				t.Fatalf("Add = %v, want ErrBadFeedback", err)
			}
			if a.Reported() != 0 {
				t.Errorf("rejected batch recorded %d losses", a.Reported())
			}
		})
	}
}

func TestAccumulatorKeepsLargestLoss(t *testing.T) {
	a, err := NewAccumulator(dataset{"id", 5}, "job", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		ids    []int
		losses []float32
	}{
		{[]int{0, 1, 2}, []float32{2, 0.5, 0}},
		{[]int{0, 1, 1}, []float32{1, 3, 0.25}},
		{[]int{3}, []float32{float32(math.Copysign(0, -1))}},
		{nil, nil},
	} {
		if err := a.Add(b.ids, b.losses); err != nil {
			t.Fatal(err)
		}
	}
	want := []struct {
		loss float32
		ok   bool
	}{{2, true}, {3, true}, {0, true}, {0, true}, {0, false}}
	for i, w := range want {
		l, ok := a.loss(i)
		if ok != w.ok || ok && (l != w.loss || math.Signbit(float64(l))) {
			t.Errorf("sample %d: loss %v, %v; want %v, %v", i, l, ok, w.loss, w.ok)
		}
	}
	if a.Reported() != 4 {
		t.Errorf("Reported = %d, want 4", a.Reported())
	}
}

func TestAccumulatorMerge(t *testing.T) {
	ds := dataset{"id", 4}
	parts := make([]*Accumulator, 3)
	for i := range parts {
		var err error
		if parts[i], err = NewAccumulator(ds, "job", 2); err != nil {
			t.Fatal(err)
		}
	}
	mustAdd(t, parts[0], []int{0, 1}, []float32{1, 5})
	mustAdd(t, parts[1], []int{1, 2}, []float32{4, 7})
	mustAdd(t, parts[2], []int{0}, []float32{3})

	// Any merge order gives the same scores.
	orders := [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}}
	var versions []string
	for _, o := range orders {
		m, _ := NewAccumulator(ds, "job", 2)
		for _, i := range o {
			if err := m.Merge(parts[i]); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Seal(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, s.Version())
		for i, want := range []float32{3, 5, 7, 5} { // sample 3: mean of 3, 5, 7
			if s.Score(i) != want {
				t.Errorf("order %v: score %d = %v, want %v", o, i, s.Score(i), want)
			}
		}
	}
	if versions[0] != versions[1] || versions[0] != versions[2] {
		t.Errorf("merge orders give versions %v", versions)
	}

	for _, other := range []struct {
		ds    Dataset
		job   string
		epoch uint64
	}{
		{dataset{"other", 4}, "job", 2},
		{ds, "job2", 2},
		{ds, "job", 3},
		{dataset{"id", 5}, "job", 2},
	} {
		o, _ := NewAccumulator(other.ds, other.job, other.epoch)
		if err := parts[0].Merge(o); !errors.Is(err, ErrMismatch) {
			t.Errorf("merging %+v: %v, want ErrMismatch", other, err)
		}
	}
}

func TestAccumulatorConcurrentAdds(t *testing.T) {
	const n, writers = 1000, 8
	a, _ := NewAccumulator(dataset{"id", n}, "job", 0)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			ids := make([]int, n)
			losses := make([]float32, n)
			for i := range ids {
				ids[i] = i
				losses[i] = float32((i*7 + g*13) % 101)
			}
			if err := a.Add(ids, losses); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range n {
		var want float32
		for g := range writers {
			want = max(want, float32((i*7+g*13)%101))
		}
		if l, _ := a.loss(i); l != want {
			t.Fatalf("sample %d: %v, want %v", i, l, want)
		}
	}
}

func TestNewAccumulatorRejectsBadJob(t *testing.T) {
	if _, err := NewAccumulator(dataset{"id", 1}, "a/b", 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("job a/b: %v, want ErrInvalid", err)
	}
}

func mustAdd(t *testing.T, a *Accumulator, ids []int, losses []float32) {
	t.Helper()
	if err := a.Add(ids, losses); err != nil {
		t.Fatal(err)
	}
}
