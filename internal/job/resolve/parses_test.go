package resolve

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/shuffle"
)

// TestParses: a query string parsed through parses is what query.Parse
// returns, with features.Requested of its job, whether kept or not; a
// refused one is refused every time and never kept; the table starts
// again past its bound rather than grow.
func TestParses(t *testing.T) {
	defaults := query.Query{Job: api.Job{Dataset: "test", Params: shuffle.Params{Seed: 42, BatchSize: 8, Window: 2, World: 1}}}
	limits := query.Limits{MaxBatchSize: 1 << 10, MaxWindow: 64, MaxWorld: 64, MaxEpoch: 1 << 20}
	var p parses
	tests := []struct {
		name, raw string
		refused   bool
	}{
		{"defaults", "", false},
		{"a rank's job", "seed=7&batch_size=64&world=4&rank=3", false},
		{"a mixture", "mix=a:0.5,b:0.5", false},
		{"drop last", "drop_last=true&offset=5", false},
		{"unknown parameter", "frobnicate=1", true},
		{"rank past world", "world=2&rank=2", true},
		{"given twice", "seed=1&seed=2", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, wantErr := query.Parse(tt.raw, query.JobParams, defaults, limits)
			for round := range 2 { // parsed, then kept
				q, req, err := p.parse(tt.raw, defaults, limits)
				if (err != nil) != tt.refused || (wantErr != nil) != tt.refused {
					t.Fatalf("round %d: err %v, query.Parse's %v; want refused %t", round, err, wantErr, tt.refused)
				}
				if tt.refused {
					if _, kept := p.m[tt.raw]; kept {
						t.Fatalf("a refused query string kept")
					}
					continue
				}
				if !reflect.DeepEqual(q, want) {
					t.Fatalf("round %d: %+v, query.Parse's %+v", round, q, want)
				}
				if !req.known || req.named != features.Requested(want.Job) {
					t.Fatalf("round %d: features %v (known %t), want %v", round, req.named, req.known, features.Requested(want.Job))
				}
			}
		})
	}
	for i := range maxParses + 1 {
		if _, _, err := p.parse("seed="+strings.Repeat("1", 1+i%9)+"&offset="+strconv.Itoa(i), defaults, limits); err != nil {
			t.Fatal(err)
		}
	}
	if len(p.m) > maxParses {
		t.Fatalf("%d query strings kept, over %d", len(p.m), maxParses)
	}
	for i := range 50 { // query strings of 4 KiB less a little: the bytes' bound
		raw := "seed=" + strconv.Itoa(i) + "&window=" + strings.Repeat("0", maxParsedBytes-40) + "1"
		if _, _, err := p.parse(raw, defaults, limits); err != nil {
			t.Fatal(err)
		}
		total := 0
		for k := range p.m {
			total += len(k)
		}
		if total > maxParsesBytes || total != p.bytes {
			t.Fatalf("%d bytes of query strings kept (counted %d), over %d", total, p.bytes, maxParsesBytes)
		}
	}
	// (A dataset name is at most 128 bytes now: a window of leading
	// zeros makes the long query string.)
	long := "seed=1&window=" + strings.Repeat("0", maxParsedBytes) + "1"
	if _, _, err := p.parse(long, defaults, limits); err != nil {
		t.Fatal(err)
	}
	if _, kept := p.m[long]; kept {
		t.Fatalf("a query string of %d bytes kept", len(long))
	}
}
