package main

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/transform"
)

// The transform flags reach the gateway's configuration: the pipelines
// of --transform-config, the pixel bound, the workers (the machine's
// cores by default), the bad-image policy and the bytes made ahead (0:
// none); a configuration that does not parse, or defines a pipeline
// twice, fails at start, naming the file.
func TestServeTransformFlags(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"pipelines": {"small": {"ops": [{"op": "center_crop", "size": 96}]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"pipelines": {"small": {"ops": [{"op": "center_crop", "sise": 96}]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) (*serveFlags, error) {
		var f serveFlags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		f.register(fs, ":0")
		return &f, fs.Parse(append([]string{"--dataset", "/tmp/x"}, args...))
	}
	f, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.gatewayConfig(zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Transforms.Pipelines) != 0 || cfg.MaxImagePixels != transform.DefaultMaxPixels || cfg.TransformWorkers != runtime.NumCPU() ||
		cfg.OnBadImage != "fail" || cfg.TransformAheadBytes != 0 {
		t.Errorf("defaults: %+v %d %d %q %d", cfg.Transforms, cfg.MaxImagePixels, cfg.TransformWorkers, cfg.OnBadImage, cfg.TransformAheadBytes)
	}
	f, err = parse("--transform-config", good, "--max-image-pixels", "1000000", "--transform-workers", "3", "--on-bad-image", "skip", "--transform-ahead-bytes", "0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = f.gatewayConfig(zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Transforms.Pipelines["small"]; !ok || cfg.MaxImagePixels != 1000000 || cfg.TransformWorkers != 3 ||
		cfg.OnBadImage != "skip" || cfg.TransformAheadBytes != -1 {
		t.Errorf("given: %+v %d %d %q %d", cfg.Transforms, cfg.MaxImagePixels, cfg.TransformWorkers, cfg.OnBadImage, cfg.TransformAheadBytes)
	}
	if f.besideCache() != f.copyLimit()+3*transformWorkerBytes+256<<20 {
		t.Errorf("the memory beside the cache leaves out the workers")
	}
	f, _ = parse("--transform-config", bad)
	if _, err := f.gatewayConfig(zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "bad.json") || !strings.Contains(err.Error(), "sise") {
		t.Errorf("a misspelt field: %v", err)
	}
	// A pipeline defined twice is refused at start, naming it (the last
	// definition used to win silently).
	twice := filepath.Join(dir, "twice.json")
	if err := os.WriteFile(twice, []byte(`{"pipelines": {"small": {"ops": [{"op": "center_crop", "size": 96}]},
		"small": {"ops": [{"op": "center_crop", "size": 64}]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ = parse("--transform-config", twice)
	if _, err := f.gatewayConfig(zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "twice.json") || !strings.Contains(err.Error(), `pipeline "small" is defined twice`) {
		t.Errorf("a pipeline defined twice: %v", err)
	}
	f, _ = parse("--transform-workers", "-1")
	if _, err := f.gatewayConfig(zerolog.Nop()); err == nil {
		t.Error("negative workers accepted")
	}
}

// --memory-limit is the node's budget: auto the parts' total, with room
// for the largest decode the pixel bound allows, set as Go's limit (less
// outsideGo, what the process holds beyond Go's memory) unless GOMEMLIMIT
// is; a size the budget the parts are fitted to; off the
// parts as auto, Go's limit untouched; a size that leaves nothing beside
// the cache, or no size at all, fails at start.
func TestMemoryLimitFlag(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	parse := func(args ...string) *serveFlags {
		var f serveFlags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		f.register(fs, ":0")
		if err := fs.Parse(append([]string{"--dataset", "/tmp/x", "--cache-size", "1GiB", "--transform-workers", "2"}, args...)); err != nil {
			t.Fatal(err)
		}
		return &f
	}
	maxWork := func(pixels int64) int64 {
		set, err := transform.NewSet(transform.Config{}, transform.Options{MaxPixels: pixels})
		if err != nil {
			t.Fatal(err)
		}
		return set.MaxWork()
	}
	tests := []struct {
		name     string
		args     []string
		env      string
		limit    int64 // cfg.MemoryLimit
		goLimit  int64 // Go's limit after; 0: untouched
		decodes  int64
		errorHas string
	}{
		{"auto", nil, "", 0, 1<<30 + 256<<20 + 512<<20 + maxWork(transform.DefaultMaxPixels) - outsideGo, maxWork(transform.DefaultMaxPixels), ""},
		{"auto, a small pixel bound: the workers' floor", []string{"--max-image-pixels", "100000"}, "", 0, 1<<30 + 256<<20 + 512<<20 + 2*transformWorkerBytes - outsideGo, 2 * transformWorkerBytes, ""},
		{"auto under GOMEMLIMIT", nil, "2GiB", 0, 0, maxWork(transform.DefaultMaxPixels), ""},
		{"a size: copies and decodes halve what is left", []string{"--memory-limit", "2GiB"}, "", 2 << 30, 2<<30 - outsideGo, 384 << 20, ""},
		{"off", []string{"--memory-limit", "off"}, "", 0, 0, maxWork(transform.DefaultMaxPixels), ""},
		{"too small", []string{"--memory-limit", "1200MiB"}, "", 0, 0, 0, "leaves 0 B beside the cache"},
		{"not a size", []string{"--memory-limit", "lots"}, "", 0, 0, 0, "want auto, off or a size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			f := parse(tc.args...)
			cfg, err := f.gatewayConfig(zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			err = f.applyMemoryLimit(zerolog.Nop(), func(k string) string {
				if k == "GOMEMLIMIT" {
					return tc.env
				}
				return ""
			}, &cfg)
			if tc.errorHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errorHas) {
					t.Fatalf("%v, want an error saying %q", err, tc.errorHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			goLimit := debug.SetMemoryLimit(-1)
			if cfg.MemoryLimit != tc.limit || tc.goLimit != 0 && goLimit != tc.goLimit || tc.goLimit == 0 && goLimit != math.MaxInt64 {
				t.Errorf("budget %d, Go's limit %d; want %d, %d", cfg.MemoryLimit, goLimit, tc.limit, tc.goLimit)
			}
			parts, err := gateway.MemoryBudget(cfg)
			if err != nil || parts.Decodes != tc.decodes {
				t.Errorf("decodes %d (%v), want %d", parts.Decodes, err, tc.decodes)
			}
		})
	}
}
