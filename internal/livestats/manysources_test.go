package livestats

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/order"
)

// TestManySourcesFiguresCostPerPart: a mixture of more sources than
// statsJobs makes room for a stream at nearly every part it serves; that
// costs the same allocations whatever the number of jobs kept. Each
// stream's labels were made again for every job kept, at every part: 14 %
// of a 100-source mixture's allocations (issue 43's schedule bench).
func TestManySourcesFiguresCostPerPart(t *testing.T) {
	const sources = 100
	var ds []*catalog.Dataset
	for i := range sources {
		ds = append(ds, testDataset(t, fmt.Sprintf("s%03d", i)))
	}
	s := New(prometheus.NewRegistry(), 1<<20, nil, nil, zerolog.Nop())
	defer s.Close()
	next := 0
	part := func() {
		d := ds[next%sources]
		next++
		s.Batch(Served{Stream: order.Stream{DS: d, Seed: 1, Window: 2, Mix: "m"}, Epoch: 0, EpochSamples: 16,
			Samples: 1, Chunks: []int{0}, Loads: 1, LoadedBytes: 4096, StoreBytes: 4096})
	}
	for range 2 * sources { // every stream seen, figures at the bound
		part()
	}
	allocs := testing.AllocsPerRun(200, part)
	t.Logf("%.0f allocations a part, %d jobs kept", allocs, statsJobs)
	// Making room for one stream costs its figures and its series: 133
	// allocations, most of them the series' Delete and With in
	// client_golang. Labels made again for each job kept added 64 (197).
	if allocs > 160 {
		t.Errorf("%.0f allocations to serve a part of a mixture of %d sources (%d jobs kept)", allocs, sources, statsJobs)
	}
}
