package usetable_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/batch/units/tokens"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// tokenSource is a Megatron token dataset of n documents of 1 to 96
// tokens, in chunks of about 64 KiB (60 documents, each 1 KiB resident
// with its tar header), loaded as a gateway loads it and
// viewed as a token job reads it.
func tokenSource(t *testing.T, name string, n int, seed uint64) *catalog.Dataset {
	t.Helper()
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin, idx := megatrontest.Files("int32", megatrontest.Corpus(n, 96, 50000, seed))
	for key, b := range map[string][]byte{"data/p_text_document.bin": bin, "data/p_text_document.idx": idx} {
		if _, err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{
		Formats: []format.Format{megatron.Format{}}, Options: format.Options{ChunkBytes: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	ds, err := catalog.Load(ctx, catalog.Spec{Name: name, URL: "file:///" + name, Store: st, Formats: []format.Format{megatron.Format{}}},
		s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if ds, err = tokens.TokenView(ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

// newTokenSwitchRun is newSwitchRun over two token datasets a and b of
// 1,200 documents each (20 chunks), a token job of sequences of 32
// tokens (8 a rank's batch, two ranks; epochs of 1,600 sequences, 100
// steps) reading schedule sched, through a
// cache of capacity bytes.
func newTokenSwitchRun(t *testing.T, capacity func(a, b *catalog.Dataset) int64, sched string) *switchRun {
	t.Helper()
	a, b := tokenSource(t, "a", 1200, 41), tokenSource(t, "b", 1200, 42)
	sc, err := api.ParseSchedule(sched)
	if err != nil {
		t.Fatal(err)
	}
	job := api.Job{Params: shuffle.Params{BatchSize: 8, World: 2, Window: 4, Seed: 7}, Seq: 32, MixBlock: 16, MixSamples: 1600, Mix: sc[0].Mix, Schedule: sc}
	orders := units.Orders(nil)
	mixed, err := orders.Compose(orders.UnitOf(features.Requested(job)), []*catalog.Dataset{a, b}, job)
	if err != nil {
		t.Fatal(err)
	}
	return wireSwitchRun(t, orders, mixed, job, capacity(a, b))
}

// bytesOf is a dataset's chunks' bytes in the cache.
func bytesOf(ds *catalog.Dataset) int64 {
	var n int64
	for c := range ds.Index.NumChunks() {
		n += ds.ChunkSize(c)
	}
	return n
}

// TestPrefetchWarmsATokenPhaseAhead: TestPrefetchWarmsThePhaseAhead over
// token datasets. A token component's stream is read by document
// positions while the schedule counts its packed sequences; its pace
// (jobstream.NewTokenPace) is the schedule's in documents, estimated from its
// documents per sequence (here 2.9 in b's first pass). In a cache of
// half the data (20 chunks of 60 documents of the 40), b's 7 chunks the
// 8 steps after the switch read are all in the cache at the switch, and
// none is loaded on demand. Before, a token schedule's components had no
// pace: prefetch listed the rising source's next window at its weight
// before the switch; 6 of the 7 were not in the cache at the switch, 3
// were loaded on demand (at a third of the data, 6 and 4; with the pace,
// 3 of them are read by prefetch after the switch, in time: none on
// demand).
func TestPrefetchWarmsATokenPhaseAhead(t *testing.T) {
	const (
		switch1 = 40
		after   = 8 // steps after the switch checked
	)
	// b from 1 sequence of a mixing block of 16 to 14: its pace times 14.
	r := newTokenSwitchRun(t, func(a, b *catalog.Dataset) int64 { return (bytesOf(a) + bytesOf(b)) / 2 },
		fmt.Sprintf("0:a:15,b:1;%d:a:2,b:14", switch1))
	for m := range switch1 {
		r.step(m)
	}
	r.warmAtSwitch(t, "b", switch1, after)
}
