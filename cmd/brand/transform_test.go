package main

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rs/zerolog"

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
