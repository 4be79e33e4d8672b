package livestats_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/livestats"
	"github.com/brandgw/brand/shuffle"
)

// extentOnly is a decoder of a dataset served in place that says only
// where each chunk lies in the store: two ranges, 150 bytes.
type extentOnly struct{ format.Decoder }

func (extentOnly) Extent(int, format.Selection) ([]format.Range, int64) {
	return []format.Range{{Off: 0, Len: 100}, {Off: 200, Len: 50}}, 8192
}

// A chunk of a dataset served in place read ahead from the store counts
// its store extent as the job's backend bytes, not what it takes in the
// cache; read ahead from the disk tier, no store bytes. (That a batch's
// reads count the same is internal/batch/reader's TestStoreBytesInPlace.)
func TestPrefetchCountsStoreBytesInPlace(t *testing.T) {
	s := livestats.New(prometheus.NewRegistry(), 1<<20, nil, nil, zerolog.Nop())
	defer s.Close()
	ds := livestats.FourChunks(t, "d")
	ds.InPlace = &catalog.InPlace{Decoder: extentOnly{}}
	js := layout.Stream{DS: ds, Seed: 1, Window: 2, Name: "j"}
	s.Prefetched(js, 0, 1, 8192, false)
	s.Prefetched(js, 0, 2, 8192, true)
	jobs := s.Jobs()
	if len(jobs) != 1 || jobs[0].BackendBytes != 150 {
		t.Fatalf("jobs %+v; want one whose backend bytes are the store extent read, 150", jobs)
	}
}

// A mixture's components count what their parts' reads and read-aheads
// took from the store: a component served in place its store extents, a
// tar component its chunks.
func TestMixtureCountsStoreBytesInPlace(t *testing.T) {
	s := livestats.New(prometheus.NewRegistry(), 1<<20, nil, nil, zerolog.Nop())
	defer s.Close()
	lines, web := livestats.FourChunks(t, "lines"), livestats.FourChunks(t, "web")
	lines.InPlace = &catalog.InPlace{Decoder: extentOnly{}}
	mix, err := api.ParseMix("lines:1,web:1")
	if err != nil {
		t.Fatal(err)
	}
	job := api.Job{Params: shuffle.Params{BatchSize: 8, World: 1, Window: 2, Seed: 1}, Mix: mix}
	orders := units.Orders(nil)
	mixed, err := orders.Compose(orders.UnitOf(features.Requested(job)), []*catalog.Dataset{lines, web}, job)
	if err != nil {
		t.Fatal(err)
	}
	streams := []layout.Stream{{DS: lines, Seed: 1, Window: 2, Mix: mixed.Key()}, {DS: web, Seed: 1, Window: 2, Mix: mixed.Key()}}
	b := &layout.Batch{Source: layout.Source{Unit: mixed}, Job: job, Parts: []layout.Part{{Comp: 0, Stream: streams[0]}, {Comp: 1, Stream: streams[1]}}}
	s.Follow(b)
	s.Batch(livestats.Served{Stream: livestats.MixJob(b), Samples: 8, Mix: mixed, Parts: []livestats.PartServed{
		{Stream: streams[0], Comp: 0, Samples: 4, Chunks: []int{0}, Loads: 1, StoreBytes: 150},
		{Stream: streams[1], Comp: 1, Samples: 4, Chunks: []int{0}, Loads: 1, StoreBytes: 4096},
	}})
	s.Prefetched(streams[0], 0, 1, 8192, false)
	s.Prefetched(streams[1], 0, 1, 8192, false)
	mixes := s.Mixtures()
	if len(mixes) != 1 || len(mixes[0].Components) != 2 {
		t.Fatalf("mixtures %+v", mixes)
	}
	for i, want := range []int64{150 + 150, 4096 + 8192} {
		if c := mixes[0].Components[i]; c.BackendBytes != want {
			t.Errorf("component %s: %d backend bytes, want %d", c.Dataset, c.BackendBytes, want)
		}
	}
	// A mixture is one job: its row counts every component's store bytes.
	var jobBytes int64
	for _, j := range s.Jobs() {
		jobBytes += j.BackendBytes
	}
	if want := int64(150 + 150 + 4096 + 8192); jobBytes != want {
		t.Errorf("the mixture's job: %d backend bytes, want %d", jobBytes, want)
	}
}
