package layout

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
)

// TestSpanMemoCountsItsMixtures: the memo of mixture spans counts, beside
// each span, the mixture it holds, once however many of its spans are
// kept: a client naming a new mixture in every request leaves spans
// whose mixtures the memo of mixtures (16) has long dropped, and those
// mixtures' rounding tables are what the spans keep alive. The count
// stays within the memo's bound.
//
// The reproduction: the memo counted the spans' own bytes alone, so it
// kept up to 4,096 spans, each holding a mixture of its own of up to
// 512 KiB (about 100 KB each here, of 20 components) that nothing
// counted.
func TestSpanMemoCountsItsMixtures(t *testing.T) {
	var comps []*catalog.Dataset
	for c := range 20 {
		comps = append(comps, catalogtest.Dataset(t, fmt.Sprintf("d%02d", c), 1, 500))
	}
	o := New(nil)
	j := job(8, 1, 0)
	j.MixBlock = 1
	for i := range 24 {
		var w []string
		for c := range comps {
			w = append(w, fmt.Sprintf("d%02d:%d", c, 1000+7*c+c*c+i))
		}
		mix, err := api.ParseMix(strings.Join(w, ","))
		if err != nil {
			t.Fatal(err)
		}
		jm := j
		jm.Mix = mix
		m, err := o.Mixture(mix, comps, jm)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Layout(context.Background(), Source{Mix: m}, jm, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	s := o.mixes.spans
	var want int64
	held := map[*shuffle.Mixture]bool{}
	for _, sp := range s.memo.Values() {
		want += sp.Bytes()
		if m := sp.Mixture(); !held[m] {
			held[m] = true
			want += m.Bytes()
		}
	}
	if got := s.bytes.Load(); got != want || len(held) == 0 {
		t.Fatalf("the memo counts %d bytes; its %d spans and the %d mixtures they hold take %d", got, s.memo.Len(), len(held), want)
	}
	if got := s.bytes.Load(); got > maxMemoMixSpanBytes {
		t.Fatalf("the memo holds %d bytes, over its bound of %d", got, maxMemoMixSpanBytes)
	}
}
