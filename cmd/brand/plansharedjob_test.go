package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"strings"
	"testing"

	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/shuffle"
)

func TestParseSharedJob(t *testing.T) {
	base := planner.SharedJob{Job: planner.Job{Params: shuffle.Params{Seed: 5, Window: 8, BatchSize: 32, World: 2}, Epochs: 3}}
	with := func(change func(j *planner.SharedJob)) planner.SharedJob {
		j := base
		j.Speed = 1
		change(&j)
		return j
	}
	tests := []struct {
		spec    string
		want    planner.SharedJob
		wantErr string
	}{
		{"", with(func(*planner.SharedJob) {}), ""},
		{"name=eval", with(func(j *planner.SharedJob) { j.Name = "eval" }), ""},
		{"seed=7,window=4", with(func(j *planner.SharedJob) { j.Seed, j.Window = 7, 4 }), ""},
		{"batch_size=16, world=4 ,drop_last=true", with(func(j *planner.SharedJob) { j.BatchSize, j.World, j.DropLast = 16, 4, true }), ""},
		{"epochs=1,first_epoch=2", with(func(j *planner.SharedJob) { j.Epochs, j.FirstEpoch = 1, 2 }), ""},
		{"speed=0.5,start=0.25", with(func(j *planner.SharedJob) { j.Speed, j.Start = 0.5, 0.25 }), ""},
		{"seed=18446744073709551615,start=0", with(func(j *planner.SharedJob) { j.Seed = 1<<64 - 1 }), ""},
		{"name=a,seed=1,window=2,batch_size=3,world=4,epochs=5,first_epoch=6,drop_last=false,speed=2,start=1", planner.SharedJob{
			Job: planner.Job{Params: shuffle.Params{Seed: 1, Window: 2, BatchSize: 3, World: 4}, FirstEpoch: 6, Epochs: 5}, Name: "a", Speed: 2, Start: 1}, ""},

		{"colour=red", base, `unknown key "colour" (known: name, seed, window`},
		{"batch-size=4", base, `unknown key "batch-size"`},
		{"seed=1,seed=2", base, "seed given twice"},
		{"seed", base, `"seed" is not key=value`},
		{"seed=1,", base, `"" is not key=value`},
		{"seed=-1", base, `seed: "-1" is not an unsigned 64-bit integer`},
		{"window=four", base, `window: "four" is not an integer`},
		{"window=0", base, "window: 0; must be at least 1"},
		{"batch_size=0", base, "batch_size: 0; must be at least 1"},
		{"world=-2", base, "world: -2; must be at least 1"},
		{"epochs=0", base, "epochs: 0; must be at least 1"},
		{"first_epoch=-1", base, "first_epoch: -1; must be at least 0"},
		{"drop_last=maybe", base, `drop_last: "maybe" is not true or false`},
		{"speed=0", base, "speed: 0; must be a finite number > 0"},
		{"speed=-1", base, "speed: -1; must be a finite number > 0"},
		{"speed=NaN", base, "speed: NaN; must be a finite number > 0"},
		{"speed=1e999", base, "speed: 1e999; must be a finite number > 0"},
		{"speed=fast", base, `speed: "fast" is not a number`},
		{"start=-0.5", base, "start: -0.5; must be a finite number >= 0"},
		{"start=Inf", base, "start: Inf; must be a finite number >= 0"},
		{"name=a b", base, "name"},
		{"name=", base, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := parseSharedJob(tt.spec, base)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v; want one containing %q", err, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), "--shared-job"):
				t.Errorf("error %v does not name the flag", err)
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			case tt.wantErr == "" && got != tt.want:
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// A spec's mistakes are reported when the flag is parsed; the flags a
// shared plan cannot honour are refused together with it.
func TestSharedJobFlags(t *testing.T) {
	tests := []struct {
		args    []string
		jobs    int
		wantErr string
	}{
		{[]string{"--shared-job", "name=a", "--shared-job", "seed=9,speed=0.5"}, 2, ""},
		{[]string{"--shared-job", ""}, 1, ""},
		{[]string{"--shared-job", "seed=x"}, 0, `invalid value "seed=x" for flag -shared-job`},
		{[]string{"--shared-job", "name=a", "--nodes", "4"}, 0, "--shared-job and --nodes are not supported together"},
		{[]string{"--shared-job", "name=a", "--ranks-per-node", "2"}, 0, "--shared-job and --ranks-per-node are not supported together"},
		{[]string{"--shared-job", "name=a", "--snapshot", "x.brandimp"}, 0, "--shared-job and --snapshot are not supported together: importance mode"},
		{[]string{"--shared-job", "name=a", "--job", "train"}, 0, "--shared-job and --job are not supported together"},
		{[]string{"--shared-job", "name=a", "--importance", "0123456789abcdef"}, 0, "--shared-job and --importance are not supported together"},
		{[]string{"--shared-job", "name=a", "--hot", "3"}, 0, "--shared-job and --hot are not supported together"},
		{[]string{"--shared-job", "name=a", "--bandwidth", "1GiB"}, 0, "--shared-job and --bandwidth are not supported together"},
		{[]string{"--shared-job", "name=a", "--prefetch-windows", "2"}, 0, "--shared-job and --prefetch-windows are not supported together"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var (
				s   sharedJobFlags
				cl  planCluster
				imp planImportance
				n   int
				str string
			)
			fs := flag.NewFlagSet("plan", flag.ContinueOnError)
			fs.SetOutput(new(bytes.Buffer))
			fs.Var(&s, "shared-job", "")
			fs.StringVar(&str, "bandwidth", "", "")
			fs.StringVar(&str, "consume", "", "")
			fs.IntVar(&n, "prefetch-windows", 1, "")
			cl.register(fs)
			imp.register(fs)
			err := fs.Parse(tt.args)
			var jobs []planner.SharedJob
			if err == nil {
				jobs, err = s.jobs(fs, planner.Job{Params: shuffle.Params{Window: 8, BatchSize: 32, World: 1}, Epochs: 3})
			}
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v; want one containing %q", err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			case tt.wantErr == "" && len(jobs) != tt.jobs:
				t.Errorf("%d jobs, want %d", len(jobs), tt.jobs)
			}
		})
	}
}

// `brand plan --shared-job ...` prints MakeSharedPlan's report for the
// dataset's index, keys left out taken from the command's flags, in text
// and in JSON.
func TestPlanSharedJobs(t *testing.T) {
	dir, d, _ := planDataset(t)
	want, err := planner.MakeSharedPlan(context.Background(), planner.SharedInput{
		Dataset:    d,
		CacheBytes: 256 << 10,
		Jobs: []planner.SharedJob{
			{Job: planner.Job{Params: shuffle.Params{Seed: 3, Window: 4, BatchSize: 16, World: 2}, Epochs: 3}, Name: "train", Speed: 1},
			{Job: planner.Job{Params: shuffle.Params{Seed: 9, Window: 4, BatchSize: 16, World: 2}, Epochs: 2}, Name: "eval", Speed: 0.5, Start: 0.5},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := want.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	args := []string{"plan", "--src", dir, "--cache-size", "256KiB", "--seed", "3", "--window", "4", "--batch-size", "16", "--world", "2",
		"--shared-job", "name=train", "--shared-job", "name=eval,seed=9,epochs=2,speed=0.5,start=0.5"}

	code, stdout, stderr := brand(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stdout != text.String() {
		t.Errorf("printed\n%s\nwant\n%s", stdout, text.String())
	}
	for _, section := range []string{"Dataset ", "Cache ", "shared by 2 jobs", "#  ", "Windows ", "optimal over the merged schedule",
		"partitioned: each job alone with 1/2 of the cache", "reads per epoch", "1 eval "} {
		if !strings.Contains(stdout, section) {
			t.Errorf("the report lacks %q:\n%s", section, stdout)
		}
	}

	code, stdout, stderr = brand(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, stderr)
	}
	var got planner.SharedPlan
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("--json: %v:\n%s", err, stdout)
	}
	if len(got.Jobs) != 2 || got.Jobs[0].Name != "train" || got.Jobs[1].Seed != 9 || got.Jobs[1].World != 2 {
		t.Errorf("--json jobs %+v", got.Jobs)
	}
	if got.OptimalReads != want.OptimalReads || got.LRU.BackendBytes != want.LRU.BackendBytes {
		t.Errorf("--json: optimal %v, LRU %d bytes; want %v, %d", got.OptimalReads, got.LRU.BackendBytes, want.OptimalReads, want.LRU.BackendBytes)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--shared-job", "colour=red"}, `unknown key "colour"`},
		{[]string{"--shared-job", "window=0"}, "window: 0; must be at least 1"},
		{[]string{"--shared-job", "seed=1,seed=2"}, "seed given twice"},
		{[]string{"--shared-job", "name=a", "--nodes", "4"}, "not supported together"},
		{[]string{"--shared-job", "name=a", "--snapshot", "x.brandimp"}, "not supported together"},
	} {
		code, _, stderr := brand(t, append([]string{"plan", "--src", dir}, tt.args...)...)
		if code == 0 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: exit %d, %s; want a failure saying %q", strings.Join(tt.args, " "), code, stderr, tt.want)
		}
	}
}
