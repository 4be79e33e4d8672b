package vision_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	umix "github.com/brandgw/brand/internal/batch/units/mixture"
	utok "github.com/brandgw/brand/internal/batch/units/tokens"
	uvis "github.com/brandgw/brand/internal/batch/units/vision"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/vision"
)

// visionMixRun lays out every global batch of epoch e of job over m from
// global batch from on, at every rank, checks that each sequence reads
// exactly its own documents, and returns each sequence as
// "component:sequence" by its epoch position, and the components of
// each whole global batch.
func visionMixRun(t *testing.T, o *layout.Orders, m *umix.Mixed, job api.Job, e uint64) (map[int]string, [][]int) {
	t.Helper()
	out := map[int]string{}
	var steps [][]int
	for g, batches := 0, 1; g < batches; g++ {
		var step []int
		for r := range job.World {
			j := job
			j.Rank = r
			b, err := o.Layout(context.Background(), layout.Source{Unit: m}, j, e, uint64(g))
			if err != nil {
				t.Fatalf("epoch %d batch %d rank %d: %v", e, g, r, err)
			}
			batches = b.Batches
			vb := unitstest.Vision(b)
			if vb == nil {
				t.Fatalf("batch %d: a %T, not a vision batch", g, b.Content)
			}
			if got := vb.Components(); !slices.Equal(got, vb.Comps) || len(got) != b.Len() {
				t.Fatalf("batch %d: components %v of %d sequences", g, got, b.Len())
			}
			for i, q := range vb.Seqs {
				c := vb.Comps[i]
				var docs []int
				var s string
				if vb.IsText(i) {
					n := vb.Text[i].Pad
					for _, pc := range vb.Text[i].Pieces {
						docs, n = append(docs, pc.Doc), n+pc.Len
					}
					if n != job.Seq || c != 1 {
						t.Fatalf("batch %d: text sequence %d of component %d, %d tokens", g, i, c, n)
					}
					s = fmt.Sprintf("%d:%v", c, vb.Text[i])
				} else {
					if c != 0 || len(q.Samples) == 0 {
						t.Fatalf("batch %d: image-text sequence %d of component %d holds %v", g, i, c, q.Samples)
					}
					docs, s = q.Samples, fmt.Sprintf("%d:%v", c, q)
				}
				for k, at := range vb.At[i] {
					tk := b.Take[at]
					if p := b.Parts[tk.Part]; p.Comp != c || p.Samples.IDs[tk.At] != docs[k] {
						t.Fatalf("batch %d: sequence %d of component %d reads document %d of component %d, not its %d", g, i, c, p.Samples.IDs[tk.At], p.Comp, docs[k])
					}
				}
				if _, dup := out[vb.Pos[i]]; dup {
					t.Fatalf("position %d laid out twice", vb.Pos[i])
				}
				out[vb.Pos[i]] = s
				step = append(step, c)
			}
		}
		steps = append(steps, step)
	}
	return out, steps
}

// A mixture of an image-text dataset and a text corpus of its tokenizer
// (mix=vis:1,txt:2 with seq=&vision=): every global batch (one mixing
// block of 6 sequences) holds each component exactly at its share (2
// and 4); each sequence is its component's own: the draw's pass and
// index of the vision job's epoch over the component's stream, or of the
// text token job's packing; each sequence reads exactly its documents.
// The layout is a pure function of the parameters (another Orders lays
// out the same), and a resume at world 3 from an offset lays out the
// same sequences at the same positions. Two image-text datasets, none,
// and balance= are refused saying why.
func TestVisionMixture(t *testing.T) {
	vis, txt, rule := unitstest.VisionMixFixture(t)
	raw := "mix=vis:1,txt:2&seq=256&mix_block=6&batch_size=3&world=2&window=3&vision=" + rule
	job := unitstest.TokenJob(t, raw)
	ds := []*catalog.Dataset{vis, txt}
	o := units.Orders(nil)
	m, err := unitstest.Mixture(o, job.Mix, ds, job)
	if err != nil {
		t.Fatal(err)
	}
	got, steps := visionMixRun(t, o, m, job, 0)
	if len(got) != m.Order.NumSamples() || len(steps) < 6 {
		t.Fatalf("%d sequences laid out in %d steps; the mixture's epoch has %d", len(got), len(steps), m.Order.NumSamples())
	}
	for g, step := range steps[:len(steps)-1] {
		n := [2]int{}
		for _, c := range step {
			n[c]++
		}
		if n != [2]int{2, 4} {
			t.Fatalf("global batch %d holds %v sequences of each component; its shares are 2 and 4", g, n)
		}
	}

	passes := map[[2]uint64]bool{}
	for _, d := range unitstest.EpochDraws(t, m, job, 0) {
		passes[[2]uint64{uint64(d.Component), d.Pass}] = true
	}
	t.Logf("%d sequences in %d global batches, from component passes %v", len(got), len(steps), passes)

	// Each draw is its component's own sequence.
	r, err := vision.ParseRule(rule)
	if err != nil {
		t.Fatal(err)
	}
	for pos, d := range unitstest.EpochDraws(t, m, job, 0) {
		own := job
		own.Mix, own.Window = nil, m.Order.ComponentWindow(d.Component, job.Window)
		var want string
		if d.Component == 0 {
			ve, _, err := unitstest.VisionUnit(o).Epoch(vis, own, d.Pass)
			if err != nil {
				t.Fatal(err)
			}
			// And the vision job's epoch is vision.NewEpoch of the
			// stream's order and the facts' items.
			e, err := o.Epoch(layout.StreamOf(vis, own), d.Pass)
			if err != nil {
				t.Fatal(err)
			}
			facts := vis.Vision().Facts.Samples
			items, _, err := r.Items(func(id int) vision.Facts { return facts[id] }, vis.Index.SampleKey, len(facts), job.Seq, vision.Fail)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := vision.NewEpoch(utok.Windows{Base: o.Base(), S: layout.StreamOf(vis, own).Order(), Epoch: d.Pass, E: e}, func(id int) vision.Item { return items[id] }, job.Seq, r.MaxImages, job.Seed, d.Pass)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ve.Sequence(d.Index).Samples, ref.Sequence(d.Index).Samples) {
				t.Fatalf("pass %d sequence %d: the vision job's %v, NewEpoch's %v", d.Pass, d.Index, ve.Sequence(d.Index), ref.Sequence(d.Index))
			}
			want = fmt.Sprintf("0:%v", ve.Sequence(d.Index))
		} else {
			p, err := unitstest.TokenUnit(o).Epoch(txt, own, d.Pass)
			if err != nil {
				t.Fatal(err)
			}
			want = fmt.Sprintf("1:%v", unitstest.TokenUnit(o).Sequences(nil, p, d.Index, d.Index+1)[0])
		}
		if got[pos] != want {
			t.Fatalf("position %d (component %d, pass %d, sequence %d): %s; its own job's is %s", pos, d.Component, d.Pass, d.Index, got[pos], want)
		}
	}

	// Pure: another Orders lays out the same; a resume at world 3 from
	// offset 12 lays out the same sequences at the same positions.
	o2 := units.Orders(nil)
	m2, err := unitstest.Mixture(o2, job.Mix, ds, job)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := visionMixRun(t, o2, m2, job, 0); fmt.Sprint(again) != fmt.Sprint(got) {
		t.Fatal("another Orders lays out another epoch")
	}
	w3 := unitstest.TokenJob(t, raw+"&offset=12")
	w3.World = 3
	rest, _ := visionMixRun(t, o2, m2, w3, 0)
	if len(rest) != len(got)-12 {
		t.Fatalf("world 3 from offset 12 lays out %d sequences; want %d", len(rest), len(got)-12)
	}
	for pos, s := range rest {
		if pos < 12 || got[pos] != s {
			t.Fatalf("world 3 position %d: %s; world 2's %s", pos, s, got[pos])
		}
	}

	// Refused, saying why (another vocabulary:
	// TestVisionMixtureOfAnotherVocabulary).
	for _, tc := range []struct {
		name string
		ds   []*catalog.Dataset
		raw  string
		want string
	}{
		{"two image-text", []*catalog.Dataset{vis, vis}, "mix=a:1,b:1", "vis and vis are both image-text"},
		{"none", []*catalog.Dataset{txt, txt}, "mix=a:1,b:1", "every one of its datasets is a token dataset"},
		{"balance", ds, "mix=vis:1,txt:2", "balance="},
	} {
		j := unitstest.TokenJob(t, tc.raw+"&seq=256&vision="+rule)
		if tc.name == "balance" {
			j.Balance = api.BalanceAttention // the table refuses it today; the layout on its own
		}
		if _, err := unitstest.Mixture(units.Orders(nil), j.Mix, tc.ds, j); !errors.Is(err, uvis.ErrVision) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrVision saying %q", tc.name, err, tc.want)
		}
	}
}

// A schedule of the two (mix_schedule= with seq=&vision=): 1:2 for five
// steps, then 2:1; every step (a mixing block of 6 sequences, the global
// batch) holds each component exactly at its phase's share, each
// sequence reads exactly its documents, and a resume at world 3 lays out
// the same sequences at the same positions.
func TestVisionSchedule(t *testing.T) {
	vis, txt, rule := unitstest.VisionMixFixture(t)
	raw := "mix_schedule=0:vis:1,txt:2%3B5:vis:2,txt:1&seq=256&mix_block=6&batch_size=3&world=2&window=3&vision=" + rule
	job := unitstest.TokenJob(t, raw)
	o := units.Orders(nil)
	m, err := unitstest.Mixture(o, job.Mix, []*catalog.Dataset{vis, txt}, job)
	if err != nil {
		t.Fatal(err)
	}
	got, steps := visionMixRun(t, o, m, job, 0)
	if len(steps) < 10 {
		t.Fatalf("%d steps; want 10 or more", len(steps))
	}
	for g, step := range steps[:len(steps)-1] {
		n := [2]int{}
		for _, c := range step {
			n[c]++
		}
		want := [2]int{2, 4}
		if g >= 5 {
			want = [2]int{4, 2}
		}
		if n != want {
			t.Fatalf("step %d holds %v sequences of each component; its phase's shares are %v", g, n, want)
		}
	}
	w3 := unitstest.TokenJob(t, raw+"&offset=12")
	w3.World = 3
	rest, _ := visionMixRun(t, o, m, w3, 0)
	if len(rest) != len(got)-12 {
		t.Fatalf("world 3 from offset 12 lays out %d sequences; want %d", len(rest), len(got)-12)
	}
	for pos, s := range rest {
		if pos < 12 || got[pos] != s {
			t.Fatalf("world 3 position %d: %s; world 2's %s", pos, s, got[pos])
		}
	}
}
