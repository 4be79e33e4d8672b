package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/brandgw/brand/planner"
)

// `brand plan --transform NAME --images-per-sec R` adds the pipeline's
// answers: its CPU per image calibrated here, the cores R needs, and
// whether caching decoded images would pay in the plan's cache; with
// --nodes, each node's share of the rate.
func TestPlanTransform(t *testing.T) {
	dir, _, _ := planDataset(t)
	code, stdout, stderr := brand(t, "plan", "--src", dir, "--cache-size", "256KiB", "--transform", "imagenet-eval",
		"--images-per-sec", "500", "--transform-workers", "3", "--calibration-photos", "12", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var p planner.Plan
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatal(err)
	}
	tp := p.Transform
	if tp == nil || tp.Pipeline != "imagenet-eval" || tp.Measured || tp.CPUPerImageMs <= 0 || tp.Workers != 3 ||
		tp.Cores <= 0 || tp.DecodedCache == nil || tp.DecodedCache.Factor < 2 {
		t.Fatalf("transform plan %+v", tp)
	}
	code, text, stderr := brand(t, "plan", "--src", dir, "--cache-size", "256KiB", "--transform", "imagenet-eval", "--images-per-sec", "500", "--calibration-photos", "4")
	if code != 0 || !strings.Contains(text, "Transform imagenet-eval") || !strings.Contains(text, "caching decoded images") {
		t.Errorf("text: exit %d\n%s%s", code, text, stderr)
	}
	code, stdout, stderr = brand(t, "plan", "--src", dir, "--nodes", "4", "--transform", "imagenet-eval", "--images-per-sec", "400", "--calibration-photos", "4", "--json")
	var cp planner.ClusterPlan
	if code != 0 || json.Unmarshal([]byte(stdout), &cp) != nil || cp.Transform == nil || cp.Transform.ImagesPerSec != 100 || cp.Transform.DecodedCache != nil {
		t.Errorf("--nodes 4: exit %d %s %+v", code, stderr, cp.Transform)
	}
	for _, args := range [][]string{{"--transform", "nope"}, {"--images-per-sec", "10"},
		{"--transform", "imagenet-eval", "--calibration-photos", "0"}, {"--transform", "imagenet-eval", "--calibration-photos", "10001"}} {
		code, _, stderr := brand(t, append([]string{"plan", "--src", dir}, args...)...)
		if code == 0 {
			t.Errorf("%v: exit 0 (%s)", args, stderr)
		}
		if args[len(args)-2] == "--calibration-photos" && !strings.Contains(stderr, "--calibration-photos "+args[len(args)-1]+": want 1 to 10000") {
			t.Errorf("%v: the refusal does not name the flag and its bound: %s", args, stderr)
		}
	}
}
