package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/planner"
)

// sharedJobFlags collects `brand plan`'s repeated --shared-job SPEC: one
// job each of several that read the dataset through one cache. A SPEC is
// comma-separated key=value pairs (sharedJobKeys); a key it leaves out
// takes the value of the command's own flag, so that jobs differing in
// one parameter are short to write. Set checks a SPEC's syntax at once,
// so that a mistake is reported against its flag; jobs applies the
// command's flags once they are all read.
type sharedJobFlags []string

func (s *sharedJobFlags) String() string { return strings.Join(*s, " ") }

func (s *sharedJobFlags) Set(spec string) error {
	if _, err := parseSharedJob(spec, planner.SharedJob{}); err != nil {
		return err
	}
	*s = append(*s, spec)
	return nil
}

// sharedJobKeys are a SPEC's keys, named as POST /plan's job fields, in
// the order an error lists them, each with how its value is set. The
// table is never modified.
var sharedJobKeys = []struct {
	key string
	set func(j *planner.SharedJob, v string) error
}{
	{"name", func(j *planner.SharedJob, v string) error {
		j.Name = v
		return importance.ValidJobName(v)
	}},
	{"seed", func(j *planner.SharedJob, v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an unsigned 64-bit integer", v)
		}
		j.Seed = n
		return nil
	}},
	{"window", intKey(func(j *planner.SharedJob) *int { return &j.Window }, 1)},
	{"batch_size", intKey(func(j *planner.SharedJob) *int { return &j.BatchSize }, 1)},
	{"world", intKey(func(j *planner.SharedJob) *int { return &j.World }, 1)},
	{"epochs", intKey(func(j *planner.SharedJob) *int { return &j.Epochs }, 1)},
	{"first_epoch", intKey(func(j *planner.SharedJob) *int { return &j.FirstEpoch }, 0)},
	{"drop_last", func(j *planner.SharedJob, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		j.DropLast = b
		return nil
	}},
	{"speed", floatKey(func(j *planner.SharedJob) *float64 { return &j.Speed }, func(f float64) bool { return f > 0 }, "> 0")},
	{"start", floatKey(func(j *planner.SharedJob) *float64 { return &j.Start }, func(f float64) bool { return f >= 0 }, ">= 0")},
}

// intKey sets an integer of at least lo.
func intKey(dst func(*planner.SharedJob) *int, lo int) func(*planner.SharedJob, string) error {
	return func(j *planner.SharedJob, v string) error {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return fmt.Errorf("%q is not an integer", v)
		case n < lo:
			return fmt.Errorf("%d; must be at least %d", n, lo)
		}
		*dst(j) = n
		return nil
	}
}

// floatKey sets a finite number for which ok holds (want says which).
func floatKey(dst func(*planner.SharedJob) *float64, ok func(float64) bool, want string) func(*planner.SharedJob, string) error {
	return func(j *planner.SharedJob, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			return fmt.Errorf("%q is not a number", v)
		case err != nil || math.IsNaN(f) || math.IsInf(f, 0) || !ok(f):
			return fmt.Errorf("%s; must be a finite number %s", v, want)
		}
		*dst(j) = f
		return nil
	}
}

// parseSharedJob reads spec onto base: base with the keys spec gives set.
// An empty spec is base itself.
func parseSharedJob(spec string, base planner.SharedJob) (planner.SharedJob, error) {
	j := base
	if j.Speed == 0 {
		j.Speed = 1 // as the planner takes it, and as a report shows it
	}
	if spec == "" {
		return j, nil
	}
	given := map[string]bool{}
	for _, pair := range strings.Split(spec, ",") {
		key, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return j, fmt.Errorf("--shared-job %q: %q is not key=value", spec, pair)
		}
		i := -1
		for k, sk := range sharedJobKeys {
			if sk.key == key {
				i = k
			}
		}
		if i < 0 {
			known := make([]string, len(sharedJobKeys))
			for k, sk := range sharedJobKeys {
				known[k] = sk.key
			}
			return j, fmt.Errorf("--shared-job %q: unknown key %q (known: %s)", spec, key, strings.Join(known, ", "))
		}
		if given[key] {
			return j, fmt.Errorf("--shared-job %q: %s given twice", spec, key)
		}
		given[key] = true
		if err := sharedJobKeys[i].set(&j, v); err != nil {
			return j, fmt.Errorf("--shared-job %q: %s: %w", spec, key, err)
		}
	}
	return j, nil
}

// sharedJobConflicts are the flags of `brand plan` that a shared plan has
// no use for, and why: given with --shared-job, they would be silently
// ignored. The table is never modified.
var sharedJobConflicts = []struct {
	flags []string
	why   string
}{
	{[]string{"nodes", "ranks-per-node"}, "a shared plan simulates one gateway's cache; --nodes predicts one job over a cluster"},
	{[]string{"snapshot", "job", "importance", "hot"}, "importance mode is planned for one job"},
	{[]string{"bandwidth", "consume", "prefetch-windows"}, "a shared plan counts the store's reads, with no model of stalls"},
}

// jobs returns the jobs the specs describe, keys left out taken from base
// (the command's flags), after checking that fs has none of the flags a
// shared plan cannot honour.
func (s sharedJobFlags) jobs(fs *flag.FlagSet, base planner.Job) ([]planner.SharedJob, error) {
	var err error
	fs.Visit(func(f *flag.Flag) {
		for _, c := range sharedJobConflicts {
			for _, name := range c.flags {
				if f.Name == name && err == nil {
					err = fmt.Errorf("--shared-job and --%s are not supported together: %s", name, c.why)
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]planner.SharedJob, len(s))
	for i, spec := range s {
		if out[i], err = parseSharedJob(spec, planner.SharedJob{Job: base}); err != nil {
			return nil, err
		}
	}
	return out, nil
}
