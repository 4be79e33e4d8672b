package plans_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/batch/units/tokens"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/server/httperr"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// Plan of a token job (seq=) is the planner's plan of the documents its
// sequences are packed from — batches of the documents a global batch of
// sequences holds on average — with a "tokens" section: per planned epoch
// the sequences, batches, tokens, fill and split documents the orders
// give it; its epochs and batches_per_epoch are its sequences'. A token job's resize or importance plan is refused.
func TestPlanOfATokenJob(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin, idx := megatrontest.Files("uint16", megatrontest.Corpus(240, 300, 50000, 10))
	for name, b := range map[string][]byte{"data/p_text_document.bin": bin, "data/p_text_document.idx": idx} {
		if _, err := st.Put(ctx, name, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{
		Formats: []format.Format{megatron.Format{}}, Options: format.Options{ChunkBytes: 8 << 10}}); err != nil {
		t.Fatal(err)
	}
	ds := loaded(t, st, catalog.Spec{Formats: []format.Format{megatron.Format{}}})
	orders := units.Orders(nil)
	m := newMaker(t, []*catalog.Dataset{ds}, func(c *plans.Config) { c.Epochs = orders })

	p, err := m.Plan(ctx, "seq=128&batch_size=4&epochs=2&cache_size=1MiB")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tokens api.TokenPlan `json:"tokens"`
	}
	var plan planner.Plan
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &plan); err != nil {
		t.Fatal(err)
	}
	tp := got.Tokens
	if tp.Seq != 128 || tp.Pack != "bestfit" || len(tp.Epochs) != 2 {
		t.Fatalf("tokens section %+v", tp)
	}
	view, err := tokens.TokenView(ds)
	if err != nil {
		t.Fatal(err)
	}
	job := api.Job{Dataset: "test", Params: shuffle.Params{Seed: 42, Window: 2, BatchSize: 4, World: 1}, Seq: 128}
	var seqs, docs int
	var served []api.PlanEpoch
	for e, pe := range tp.Epochs {
		info, err := orders.Info(layout.Source{DS: view}, job, uint64(e))
		if err != nil {
			t.Fatal(err)
		}
		want := api.TokenPlanEpoch{Epoch: info.Epoch, Sequences: info.Samples, Batches: info.Batches, Tokens: info.Tokens.Tokens,
			Fill: info.Tokens.Fill, Split: info.Tokens.Split}
		if pe != want || pe.Fill <= 0.5 || pe.Fill > 1 {
			t.Errorf("epoch %d: %+v, want the orders' %+v", e, pe, want)
		}
		seqs, docs = info.Samples, info.Tokens.Documents
		served = append(served, api.PlanEpoch{Epoch: info.Epoch, Samples: info.Samples, Batches: info.Batches})
	}
	perBatch := max(1, 4*docs/seqs)
	if tp.DocumentsPerBatch != perBatch {
		t.Errorf("%d documents a batch, want %d (%d documents in %d sequences, batches of 4)", tp.DocumentsPerBatch, perBatch, docs, seqs)
	}
	d := plans.Data(view)
	want, err := planner.MakePlan(ctx, planner.PlanInput{Dataset: planner.Dataset{ChunkSizes: d.Sizes, StoreSizes: d.StoreSizes, Counts: d.Counts},
		Job:        planner.Job{Params: shuffle.Params{Seed: 42, Window: 2, BatchSize: perBatch, World: 1}, Epochs: 2},
		CacheBytes: 1 << 20, BackendBytesPerSec: 1 << 30, PrefetchWindows: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Its epochs are the sequences', as /epoch/N counts them.
	want.Epochs, want.BatchesPerEpoch = served, served[0].Batches
	if !reflect.DeepEqual(&plan, want) {
		t.Errorf("the plan beside the tokens\n%+v\nwant the documents' plan, its epochs the sequences'\n%+v", plan, *want)
	}

	for _, q := range []string{"seq=128&nodes_after=2", "seq=128&sampling=importance&job=j"} {
		if _, err := m.Plan(ctx, q); httperr.Status(err) != 400 || !strings.Contains(err.Error(), "seq=") && !strings.Contains(err.Error(), "nodes_after") {
			t.Errorf("Plan(%q): %v; want 400", q, err)
		}
	}
}
