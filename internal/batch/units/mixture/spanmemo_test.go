package mixture_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units/mixture"
	"github.com/brandgw/brand/internal/batch/units/samples"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
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
	var mixtures *mixture.Mixtures
	o := layout.New(nil, func(b layout.Base) ([]layout.Unit, layout.Composer) {
		mixtures = mixture.New(b)
		return []layout.Unit{samples.New(b)}, mixtures
	})
	j := api.Job{Params: shuffle.Params{Seed: 1, Window: 2, BatchSize: 8, World: 1}, MixBlock: 1}
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
		m, err := o.Compose(o.UnitOf(features.Requested(jm)), comps, jm)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Layout(context.Background(), layout.Source{Unit: m}, jm, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	counted, held, spans, mixes := mixtures.SpanMemo()
	if counted != held || mixes == 0 {
		t.Fatalf("the memo counts %d bytes; its %d spans and the %d mixtures they hold take %d", counted, spans, mixes, held)
	}
	if counted > mixture.MaxMemoMixSpanBytes {
		t.Fatalf("the memo holds %d bytes, over its bound of %d", counted, mixture.MaxMemoMixSpanBytes)
	}
}
