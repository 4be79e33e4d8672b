package layout_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
)

func job(batch, world, rank int) api.Job {
	return api.Job{Params: shuffle.Params{Seed: 7, BatchSize: batch, Window: 2, World: world, Rank: rank}}
}

// TestLayoutOfOneDataset: a dataset's batches are one part each, served
// in the part's order, and the ranks' batches of an epoch hold every
// sample once, in the shuffle's order, whether or not the world divides
// the data; two epochs are two orders. (gateway's TestFullEpoch read
// the 91-sample row over HTTP.)
func TestLayoutOfOneDataset(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		chunks, perChunk      int
		batch, world, batches int
		epoch                 uint64 // and the next
	}{
		{"30 samples, world 3", 6, 5, 4, 3, 3, 2},
		{"91 samples in uneven batches", 7, 13, 5, 3, 7, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := catalogtest.Dataset(t, "d", tc.chunks, tc.perChunk)
			n := tc.chunks * tc.perChunk
			o := units.Orders(nil)
			src := layout.Source{DS: ds}
			var orders [2][]int
			for i, epoch := range []uint64{tc.epoch, tc.epoch + 1} {
				orders[i] = layoutEpoch(t, o, src, tc.batch, tc.world, epoch, tc.batches, n)
				e, err := shuffle.NewEpoch(ds.Counts, 7, epoch, 2)
				if err != nil {
					t.Fatal(err)
				}
				var want []int
				for w := range e.NumWindows() {
					want = append(want, e.Window(w)...)
				}
				if !slices.Equal(orders[i], want) {
					t.Fatalf("epoch %d: the ranks' batches read %v, want the epoch's order %v", epoch, orders[i], want)
				}
				if seen := slices.Compact(slices.Sorted(slices.Values(orders[i]))); len(seen) != n || len(orders[i]) != n {
					t.Fatalf("epoch %d: %d samples read, %d distinct, want each of %d once", epoch, len(orders[i]), len(seen), n)
				}
			}
			if slices.Equal(orders[0], orders[1]) {
				t.Error("two epochs have the same order")
			}
			if _, err := o.Layout(context.Background(), src, job(tc.batch, tc.world, 0), tc.epoch, uint64(tc.batches)); err == nil {
				t.Error("a batch past the epoch was laid out")
			}
		})
	}
}

// layoutEpoch lays out every batch of epoch for every rank, checks each
// is one part served in its order with the ETag known before the
// layout, and returns the sample IDs read, batch by batch, rank by rank.
func layoutEpoch(t *testing.T, o *layout.Orders, src layout.Source, batch, world int, epoch uint64, wantBatches, wantSamples int) []int {
	t.Helper()
	batches, n, err := o.Extent(src, job(batch, world, 0), epoch)
	if err != nil || n != wantSamples || batches != wantBatches {
		t.Fatalf("Extent: %d batches of %d samples, %v; want %d of %d", batches, n, err, wantBatches, wantSamples)
	}
	var got []int
	for m := range uint64(batches) {
		for r := range world {
			j := job(batch, world, r)
			b, err := o.Layout(context.Background(), src, j, epoch, m)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Parts) != 1 || b.Len() != len(b.Parts[0].Samples.IDs) {
				t.Fatalf("batch %d rank %d: %d parts, %d samples", m, r, len(b.Parts), b.Len())
			}
			p := b.Parts[0]
			if p.Stream != layout.StreamOf(src.DS, j) || p.Epoch != epoch || p.First != b.Start || p.End != b.End || p.Share != batch*world {
				t.Errorf("batch %d rank %d: part %+v (batch %d..%d)", m, r, p, b.Start, b.End)
			}
			for i, tk := range b.Take {
				if tk != (layout.Take{0, i}) {
					t.Fatalf("batch %d rank %d: take %d is %v", m, r, i, tk)
				}
			}
			if b.ETag != o.ETag(src, j, epoch, m) {
				t.Errorf("batch %d rank %d: ETag %s, not the one known before the layout", m, r, b.ETag)
			}
			got = append(got, p.Samples.IDs...)
		}
	}
	return got
}

// TestLayoutOfAMixture: a mixture's batch reads a part per component pass
// it touches, each of its own dataset, and serves them interleaved in the
// mixture's order.
func TestLayoutOfAMixture(t *testing.T) {
	a, b := catalogtest.Dataset(t, "a", 4, 5), catalogtest.Dataset(t, "b", 2, 5) // 20 and 10 samples
	o := units.Orders(nil)
	mix, err := api.ParseMix("a:0.5,b:0.5")
	if err != nil {
		t.Fatal(err)
	}
	j := job(6, 1, 0)
	m, err := unitstest.Mixture(o, mix, []*catalog.Dataset{a, b}, j)
	if err != nil {
		t.Fatal(err)
	}
	src := layout.Source{Unit: m}
	batches, n, err := o.Extent(src, j, 0)
	if err != nil {
		t.Fatal(err)
	}
	draws, err := m.Order.AppendRange(context.Background(), nil, j.Seed, 0, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	for bn := range uint64(batches) {
		bt, err := o.Layout(context.Background(), src, j, 0, bn)
		if err != nil {
			t.Fatal(err)
		}
		if bt.Turns() {
			t.Error("a mixture's batch takes turns")
		}
		comps := bt.Components()
		for i := range bt.Take {
			d := draws[bt.Start+i]
			ds, id, in := bt.Sample(i)
			if comps[i] != d.Component || ds != m.DS[d.Component] {
				t.Fatalf("batch %d sample %d: component %d of %s, want %d", bn, i, comps[i], ds.Name, d.Component)
			}
			p := bt.Parts[bt.Take[i].Part]
			if p.Epoch != d.Pass || d.Index < p.First || d.Index >= p.End {
				t.Fatalf("batch %d sample %d: part pass %d [%d,%d), draw %+v", bn, i, p.Epoch, p.First, p.End, d)
			}
			if in.Key != ds.Index.SampleKey(id) {
				t.Fatalf("batch %d sample %d: entry %q for ID %d", bn, i, in.Key, id)
			}
		}
		for _, p := range bt.Parts {
			if p.Stream != m.Stream(p.Comp, j) || p.Share != unitstest.Share(m, p.Comp, 6) {
				t.Errorf("batch %d: part %+v", bn, p)
			}
		}
	}
}

// TestWithout: a batch without some positions keeps the rest in order,
// names the missing keys, and takes the partial ETag of one rule for any
// number of parts.
func TestWithout(t *testing.T) {
	a, b := catalogtest.Dataset(t, "a", 2, 3), catalogtest.Dataset(t, "b", 2, 3)
	sa := layout.SamplesOf(a, []int{0, 1, 4}, []chunkindex.Sample{a.Index.Sample(0), a.Index.Sample(1), a.Index.Sample(4)})
	sb := layout.SamplesOf(b, []int{2, 3}, []chunkindex.Sample{b.Index.Sample(2), b.Index.Sample(3)})
	one := &layout.Batch{ETag: `"full1"`, Parts: []layout.Part{{Samples: sa}}, Take: []layout.Take{{0, 0}, {0, 1}, {0, 2}}}
	two := &layout.Batch{ETag: `"full2"`, Parts: []layout.Part{{Samples: sa}, {Comp: 1, Samples: sb}},
		Take: []layout.Take{{1, 0}, {0, 0}, {0, 1}, {1, 1}, {0, 2}}}
	tests := []struct {
		name     string
		b        *layout.Batch
		missing  []int
		wantKeys []string // served, in order
		gone     []string
	}{
		{"none", one, nil, []string{"a/0/0", "a/0/1", "a/1/1"}, nil},
		{"one part", one, []int{1}, []string{"a/0/0", "a/1/1"}, []string{"a/0/1"}},
		{"two parts", two, []int{0, 2}, []string{"a/0/0", "b/1/0", "a/1/1"}, []string{"b/0/2", "a/0/1"}},
		{"a whole part", two, []int{0, 3}, []string{"a/0/0", "a/0/1", "a/1/1"}, []string{"b/0/2", "b/1/0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := fmt.Sprint(tc.b.Take, tc.b.Parts[0].Samples.IDs)
			w := tc.b.Without(tc.missing)
			if fmt.Sprint(tc.b.Take, tc.b.Parts[0].Samples.IDs) != before {
				t.Fatal("the batch was changed in place")
			}
			var keys []string
			var bytes int64
			for i := range w.Len() {
				_, _, in := w.Sample(i)
				keys = append(keys, in.Key)
				bytes += in.Length
			}
			if !slices.Equal(keys, tc.wantKeys) || w.Bytes() != bytes {
				t.Fatalf("serves %v (%d bytes, Bytes %d), want %v", keys, bytes, w.Bytes(), tc.wantKeys)
			}
			if !slices.Equal(w.MissingKeys, tc.gone) || !slices.Equal(w.Missing, tc.missing) {
				t.Fatalf("missing %v %v, want %v %v", w.Missing, w.MissingKeys, tc.missing, tc.gone)
			}
			want := tc.b.ETag
			if len(tc.missing) > 0 {
				s := "brand-partial-v2|" + tc.b.ETag
				for _, p := range tc.missing {
					s += "|" + strconv.Itoa(p)
				}
				h := sha256.Sum256([]byte(s))
				want = `"` + hex.EncodeToString(h[:16]) + `"`
			}
			if w.ETag != want {
				t.Errorf("ETag %s, want %s", w.ETag, want)
			}
		})
	}
}

// TestInfo: an epoch's description says its extent, and a mixture's
// its components.
func TestInfo(t *testing.T) {
	a, b := catalogtest.Dataset(t, "a", 4, 5), catalogtest.Dataset(t, "b", 2, 5)
	o := units.Orders(nil)
	j := job(4, 2, 1)
	info, err := o.Info(layout.Source{DS: a}, j, 0)
	if err != nil {
		t.Fatal(err)
	}
	if info.Dataset != "a" || info.Samples != 20 || info.Batches != 3 || info.Chunks != 4 || info.Windows != 2 ||
		info.IndexID != a.ID() || info.RankSamples != j.RankSamples(20) || info.Mix != nil {
		t.Errorf("one dataset: %+v", info)
	}
	mix, _ := api.ParseMix("a:3,b:1")
	m, err := unitstest.Mixture(o, mix, []*catalog.Dataset{a, b}, j)
	if err != nil {
		t.Fatal(err)
	}
	info, err = o.Info(layout.Source{Unit: m}, j, 1)
	if err != nil {
		t.Fatal(err)
	}
	if info.Dataset != "a:3,b:1" || info.Samples != m.Order.NumSamples() || info.Chunks != 6 || info.IndexID != "" ||
		info.Mix == nil || len(info.Mix.Components) != 2 || info.Mix.Components[1].IndexID != b.ID() {
		t.Errorf("a mixture: %+v %+v", info, info.Mix)
	}
	if _, err := o.Info(layout.Source{DS: a}, api.Job{Params: shuffle.Params{BatchSize: 4, Window: 2, World: 1, Offset: 21}}, 0); err == nil {
		t.Error("an offset past the epoch was described")
	}
}

// A batch's ETag names the pipeline its images go through and the
// pipeline's fingerprint on the server: the bytes as stored, two
// pipelines, and one of them defined otherwise (another fingerprint)
// are four ETags; the same pipeline and fingerprint are one.
func TestTransformETags(t *testing.T) {
	ds, o := catalogtest.Dataset(t, "d", 4, 8), units.Orders(nil)
	etags := map[string]string{}
	for _, tc := range []struct{ name, pipeline, fingerprint string }{
		{"as stored", "", ""}, {"tiny", "tiny", "f1"}, {"plain", "plain", "f2"}, {"tiny defined otherwise", "tiny", "f3"},
	} {
		j := job(8, 1, 0)
		j.Transform, j.TransformFingerprint = tc.pipeline, tc.fingerprint
		e := o.ETag(layout.Source{DS: ds}, j, 1, 2)
		if prev, ok := etags[e]; ok {
			t.Errorf("%s and %s have one ETag", prev, tc.name)
		}
		etags[e] = tc.name
		if again := o.ETag(layout.Source{DS: ds}, j, 1, 2); again != e {
			t.Errorf("%s: ETag %s, then %s", tc.name, e, again)
		}
	}
}

// A mixture order's positions outside the epoch, or reversed, are an
// error wrapping ErrOutOfRange, never a panic; inside it, AppendRange
// appends what Draws does.
func TestMixOrderAppendRangeBadPosition(t *testing.T) {
	a, b := catalogtest.Dataset(t, "a", 4, 5), catalogtest.Dataset(t, "b", 2, 5)
	mix, err := api.ParseMix("a:0.5,b:0.5")
	if err != nil {
		t.Fatal(err)
	}
	j := job(6, 1, 0)
	m, err := unitstest.Mixture(units.Orders(nil), mix, []*catalog.Dataset{a, b}, j)
	if err != nil {
		t.Fatal(err)
	}
	n := m.Order.NumSamples()
	ctx := context.Background()
	for _, tt := range []struct {
		name       string
		start, end int
	}{
		{"past the end", 0, n + 1},
		{"negative start", -1, 3},
		{"reversed", 5, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("AppendRange(%d, %d) panicked: %v", tt.start, tt.end, p)
					}
				}()
				_, err = m.Order.AppendRange(ctx, nil, j.Seed, 0, tt.start, tt.end)
			}()
			if !errors.Is(err, layout.ErrOutOfRange) {
				t.Fatalf("AppendRange(%d, %d): %v, want an error wrapping ErrOutOfRange", tt.start, tt.end, err)
			}
		})
	}
	got, err := m.Order.AppendRange(ctx, []shuffle.Draw{{Index: -1}}, j.Seed, 0, 2, 9)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.Order.Draws(ctx, nil, j.Seed, 0, 2, 9)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 8 || got[0].Index != -1 || fmt.Sprint(got[1:]) != fmt.Sprint(want) {
		t.Fatalf("AppendRange(2, 9) = %v, want [{-1} %v]", got, want)
	}
}
