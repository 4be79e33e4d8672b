package vision_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"

	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/vision"
)

// TestVisionBadSamples: a vision job over a dataset whose facts hold bad
// samples — an image whose header does not read, a text whose
// placeholders are not its images — fails naming the first bad sample
// under the default policy (--on-bad-image=fail); under SkipBadImages
// (skip) its epoch holds every other sample once, and neither bad one,
// at every epoch and through the batches laid out.
func TestVisionBadSamples(t *testing.T) {
	const bad1, bad2 = 3, 17
	ix := catalogtest.Dataset(t, "vlm", 4, 10).Index
	facts := make([]vision.Facts, ix.NumSamples())
	for i := range facts {
		facts[i] = vision.Facts{Text: 30 + i%7, Images: []vision.ImageFacts{{W: 56 + 28*(i%3), H: 84}}}
	}
	facts[bad1].Images = []vision.ImageFacts{{Bad: "member vlm/0/3.png: not a PNG"}}
	facts[bad2] = vision.Facts{Fault: vision.FaultPlaceholders, Why: "2 <image> in the text, 1 images"}
	ds := catalogtest.WithVisionFacts(t, "vlm", "", ix, facts)
	job := unitstest.TokenJob(t, "seq=512&batch_size=2&world=2&window=2&vision="+unitstest.VLMRule)
	src := layout.Source{DS: ds}

	failing := units.Orders(nil)
	if _, _, err := failing.Extent(src, job, 0); !errors.Is(err, vision.ErrBadImage) || !bytes.Contains([]byte(err.Error()), []byte("vlm/0/3")) {
		t.Fatalf("fail: %v; want ErrBadImage naming sample vlm/0/3", err)
	}
	skipping := layout.New(nil, units.New(units.Node{SkipBadImages: true}))
	for e := range uint64(2) {
		ve, _, err := unitstest.VisionUnit(skipping).Epoch(ds, job, e)
		if err != nil {
			t.Fatal(err)
		}
		seen := make([]int, ix.NumSamples())
		for i := range ve.NumSequences() {
			for _, id := range ve.Sequence(i).Samples {
				seen[id]++
			}
		}
		for id, n := range seen {
			if want := map[bool]int{true: 0, false: 1}[id == bad1 || id == bad2]; n != want {
				t.Fatalf("skip, epoch %d: sample %d in %d sequences; want %d", e, id, n, want)
			}
		}
		n, _, err := skipping.Extent(src, job, e)
		if err != nil {
			t.Fatal(err)
		}
		laid := 0
		for m := range uint64(n) {
			for rank := range job.World {
				j := job
				j.Rank = rank
				b, err := skipping.Layout(context.Background(), src, j, e, m)
				if err != nil {
					t.Fatal(err)
				}
				laid += b.Content.Served()
			}
		}
		if laid != ve.NumSequences() {
			t.Fatalf("skip, epoch %d: %d sequences laid out; the epoch has %d", e, laid, ve.NumSequences())
		}
	}
}
