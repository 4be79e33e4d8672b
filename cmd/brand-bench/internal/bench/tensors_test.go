package bench

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want [3]float64
	}{
		{nil, [3]float64{}},
		{[]float64{3}, [3]float64{3, 3, 3}},
		{[]float64{5, 1, 3}, [3]float64{3, 1, 5}},
		{[]float64{4, 1, 3, 2}, [3]float64{2.5, 1, 4}},
	} {
		if got := spread(c.in); got != c.want {
			t.Errorf("spread(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestTensorsRun runs the tensors benchmark on 64 photos, one round (tens
// of seconds: a Python with torch starts for every pass): every
// configuration reads every image, the reports are written. It is skipped
// with -short, on fewer than two cores, and where no Python imports
// torch, torchvision, boto3 and PIL.
func TestTensorsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Python with torch for every pass")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs two cores")
	}
	cfg := DefaultTensorsConfig()
	if _, _, err := cfg.findTensorsPython(context.Background()); err != nil {
		t.Skip(err)
	}
	cfg.Images, cfg.Rounds, cfg.BatchSize = 64, 1, 16
	cfg.GatewayBinary = cmdtest.Build(t, "brand")
	cfg.WorkDir = t.TempDir()
	rep, err := RunTensors(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range rep.Rows {
		got[r.Config] = r.Images
		if r.ImagesPerSec <= 0 || r.Seconds <= 0 {
			t.Errorf("%s: %+v", r.Config, r)
		}
		if strings.HasPrefix(r.Config, "brand-tensors") && r.TransformMsPerImage <= 0 {
			t.Errorf("%s: no transform figures from the gateway: %+v", r.Config, r)
		}
	}
	for _, c := range []string{tensorsS3, tensorsBytes, tensorsTensors, tensorsTensors0} {
		if got[c] != 64 {
			t.Errorf("%s read %d images, want 64", c, got[c])
		}
	}
	if len(rep.PIL) != 1 || rep.PIL[0].Images != 64 || rep.PIL[0].Uint8Ms <= 0 {
		t.Errorf("Pillow: %+v", rep.PIL)
	}
	if len(rep.Targets) != 3 || rep.Decoder == "" {
		t.Errorf("targets %+v, decoder %q", rep.Targets, rep.Decoder)
	}
	for _, write := range []func(*bytes.Buffer) error{
		func(b *bytes.Buffer) error { return rep.WriteText(b) },
		func(b *bytes.Buffer) error { return rep.WriteJSON(b) },
		func(b *bytes.Buffer) error { return writeChart(b, rep) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil || b.Len() == 0 {
			t.Errorf("report: %v (%d bytes)", err, b.Len())
		}
	}
}
