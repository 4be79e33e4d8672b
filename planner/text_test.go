package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the current output")

// goldenInput is a small job with everything a report shows: unequal
// chunk sizes, a cache that stalls, both policies differing.
func goldenInput() PlanInput {
	d := Dataset{}
	for c := range 40 {
		d.ChunkSizes = append(d.ChunkSizes, 64<<20+int64(c*7919%1000)*4096)
		d.Counts = append(d.Counts, 50)
	}
	return PlanInput{
		Dataset:            d,
		Job:                Job{Params: shuffle.Params{Seed: 7, Window: 4, BatchSize: 32, World: 2}, Epochs: 3},
		CacheBytes:         768 << 20,
		BackendBytesPerSec: 200 << 20,
		ConsumeBytesPerSec: 300 << 20,
	}
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestWriteTextGolden(t *testing.T) {
	p := mustPlan(t, goldenInput())
	var b bytes.Buffer
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "plan.txt", b.Bytes())
}

func TestJSONGolden(t *testing.T) {
	p := mustPlan(t, goldenInput())
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "plan.json", append(b, '\n'))

	// The JSON form round-trips, policies by name.
	var back Plan
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	again, err := json.MarshalIndent(&back, "", "  ")
	if err != nil || !bytes.Equal(again, b) {
		t.Errorf("JSON round trip changed the plan (%v)", err)
	}
	if back.Optimal.Policy != Belady || back.LRU.Policy != LRU {
		t.Errorf("policies after a round trip: %v, %v", back.LRU.Policy, back.Optimal.Policy)
	}
}

func TestWriteTextVerdicts(t *testing.T) {
	in := goldenInput()
	in.ConsumeBytesPerSec = 0
	in.CacheBytes = 8 << 30
	p := mustPlan(t, in)
	var b bytes.Buffer
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"trainer as fast as the backend", "keep up: at most 0 B to read per epoch", "keeps up: the backend is at least as fast"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, &b)
		}
	}
	p.MinNoStallCacheBytes = -1
	b.Reset()
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "none: even the whole dataset cached stalls") {
		t.Errorf("report of an impossible plan:\n%s", &b)
	}
}

type failingWriter struct{}

var errWrite = errors.New("write failed")

func (failingWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestWriteTextError(t *testing.T) {
	if err := mustPlan(t, goldenInput()).WriteText(failingWriter{}); !errors.Is(err, errWrite) {
		t.Errorf("WriteText error %v, want the writer's", err)
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {1536, "1.50 KiB"},
		{64 << 20, "64.00 MiB"}, {3 << 30, "3.00 GiB"}, {5 << 40, "5.00 TiB"}, {-1, "-1 B"},
	} {
		if got := formatBytes(tt.n); got != tt.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
