package vision_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"

	"github.com/brandgw/brand/api"
)

// TestVisionResumeAtAnotherWorldSize: a vision job read at world 2 and
// resumed at world 3 from the offset of a global batch lays out the rest
// of the epoch exactly: each sequence at its epoch position, under the
// same samples, and every position once; balanced by vision tokens too
// (a global batch's sequences are the plain cut's, each rank's its
// assignment's).
func TestVisionResumeAtAnotherWorldSize(t *testing.T) {
	ds := unitstest.VLMDataset(t, 1200)
	o := units.Orders(nil)
	src := layout.Source{DS: ds}
	// seqs lays out every batch of epoch 0 of job at every rank: each
	// sequence's samples by its epoch position.
	seqs := func(job api.Job) map[int]string {
		t.Helper()
		n, _, err := o.Extent(src, job, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int]string{}
		for m := range uint64(n) {
			for rank := range job.World {
				j := job
				j.Rank = rank
				b, err := o.Layout(context.Background(), src, j, 0, m)
				if err != nil {
					t.Fatal(err)
				}
				vb := unitstest.Vision(b)
				for i, q := range vb.Seqs {
					if _, ok := out[vb.Pos[i]]; ok {
						t.Fatalf("position %d laid out twice", vb.Pos[i])
					}
					out[vb.Pos[i]] = fmt.Sprint(q.Samples)
				}
			}
		}
		return out
	}
	for _, balance := range []string{"", "&balance=vision"} {
		raw := "seq=4096&batch_size=2&window=3&vision=" + unitstest.VLMRule + balance
		whole := seqs(unitstest.TokenJob(t, raw+"&world=2"))
		const offset = 4 * 2 * 2 // four global batches at world 2
		rest := seqs(unitstest.TokenJob(t, fmt.Sprintf("%s&world=3&offset=%d", raw, offset)))
		if len(rest) != len(whole)-offset || len(whole) < 3*offset {
			t.Fatalf("%s: world 3 from offset %d lays out %d sequences; the epoch has %d", balance, offset, len(rest), len(whole))
		}
		for pos, s := range rest {
			if pos < offset || whole[pos] != s {
				t.Fatalf("%s: world 3, position %d: samples %s; world 2's %s", balance, pos, s, whole[pos])
			}
		}
	}
}
