package chain

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/server/reqbody"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/s3backend"
)

// BenchmarkMakeAMillionKeys makes an exclusion of 1,000,000 keys of a
// 2,000,000-sample dataset, as POST /jobs/NAME/exclude does: the body's
// JSON decoded (reqbody.DecodeLargeJSON, the gateway's), each key looked
// up in the index, the edit stored (a local store) and laid out. It writes
// the seconds an edit takes (s/list), the mean of its rounds, and the CPU
// seconds the process spent on it (cpu-s/list: the work, on a machine
// other processes share). The exclusion's next epoch is
// internal/batch/layout's BenchmarkExclusionOfAMillionKeys.
func BenchmarkMakeAMillionKeys(b *testing.B) {
	ctx := context.Background()
	ds := catalogtest.Dataset(b, "d", 2000, 1000)
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]string, 0, 1_000_000)
	for _, id := range r.Perm(2_000_000)[:1_000_000] {
		keys = append(keys, key(id/1000, id%1000))
	}
	step := uint64(0)
	body, err := stdjson.Marshal(api.ExclusionEdit{FromStep: &step, Keys: keys})
	if err != nil {
		b.Fatal(err)
	}
	var total, cpu time.Duration
	n := 0
	for i := 0; b.Loop(); i++ {
		st, err := s3backend.NewLocal(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		t0, c0 := time.Now(), cpuTime()
		var e api.ExclusionEdit
		if err := reqbody.DecodeLargeJSON(bytes.NewReader(body), &e); err != nil {
			b.Fatal(err)
		}
		ed := Link{Kind: Exclude, Job: fmt.Sprint("run", i), Dataset: "d", StepSamples: 1, Keys: e.Keys}
		_, x, err := New().Make(ctx, st, ds, ds, nil, ed, nil)
		if err != nil || x.Drop.Len() != len(keys) {
			b.Fatal(err)
		}
		total += time.Since(t0)
		cpu += cpuTime() - c0
		n++
	}
	b.ReportMetric(total.Seconds()/float64(n), "s/list")
	if cpu > 0 {
		b.ReportMetric(cpu.Seconds()/float64(n), "cpu-s/list")
	}
	b.ReportMetric(float64(len(body))/1e6, "MB/body")
}
