package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/client"
)

// taskReplay is a node's GET /tasks/{job}/replay, read.
type taskReplay struct {
	leases []taskReplayLease
	steps  [][]string
	end    api.TaskReplayEnd
}

type taskReplayLease struct {
	Lease     string   `json:"lease"`
	Generator string   `json:"generator"`
	Step      uint64   `json:"step"`
	Prompts   []string `json:"prompts"`
}

func readTaskReplay(t *testing.T, ctx context.Context, url string) taskReplay {
	t.Helper()
	lines, err := client.NewTasks(url, "rl", client.TasksOptions{}).Replay(ctx)
	if err != nil {
		t.Fatalf("%s's replay: %v", url, err)
	}
	var r taskReplay
	ended := false
	for i, raw := range lines {
		var x struct {
			Lease   *string  `json:"lease"`
			Step    *uint64  `json:"step"`
			Prompts []string `json:"prompts"`
			Digest  *string  `json:"digest"`
			Error   string   `json:"error"`
		}
		if err := json.Unmarshal(raw, &x); err != nil {
			t.Fatalf("%s's replay, line %d: %v: %s", url, i, err, raw)
		}
		switch {
		case ended:
			t.Fatalf("%s's replay goes on after its end: %s", url, raw)
		case x.Error != "":
			t.Fatalf("%s's replay failed after %d lines: %s", url, i, raw)
		case x.Lease != nil:
			var l taskReplayLease
			if err := json.Unmarshal(raw, &l); err != nil {
				t.Fatal(err)
			}
			r.leases = append(r.leases, l)
		case x.Digest != nil:
			if err := json.Unmarshal(raw, &r.end); err != nil {
				t.Fatal(err)
			}
			ended = true
		case x.Step != nil:
			if *x.Step != uint64(len(r.steps)) {
				t.Fatalf("%s's replay: step %d after %d steps", url, *x.Step, len(r.steps))
			}
			r.steps = append(r.steps, x.Prompts)
		default:
			t.Fatalf("%s's replay, line %d: %s", url, i, raw)
		}
	}
	if !ended {
		t.Fatalf("%s's replay has no end line", url)
	}
	return r
}

// taskHeld is a lease a generator logged, with its answer.
type taskHeld struct {
	lease              taskEvent
	made, deadline     int64 // plan times, Unix ms
	answered, refused  bool  // applied ("ok"), or refused as expired
	sent               int64 // when the answer was first sent, Unix ms
	samples, loggedBy2 bool  // read; logged twice (taken up again)
}

// taskSim is one prompt's course through the run, replayed from the
// generators' answers alone: the pass it is in, its redraws and solves in
// it; and, by pass, what the pass did with it.
type taskSim struct {
	served, redraws, solves int
	retired                 bool
	retiredIn               int
	outcome                 []string // by pass: "counted by LEASE", "rested"
}

// checkTaskRun checks a task run once every generator and the trainer
// stopped (TestTaskStreamKills says what).
func checkTaskRun(t *testing.T, ctx context.Context, urls []string, dir, trainerLog string, ix *chunkindex.Index) {
	t.Helper()
	// Every node replays the same log to the same decisions as its plan.
	var replay taskReplay
	var plan api.TaskPlan
	for k, u := range urls {
		r := readTaskReplay(t, ctx, u)
		if !r.end.Equal || r.end.Diverged != 0 {
			t.Errorf("node %d's replay: %+v: want equal, no divergence", k, r.end)
		}
		pl, err := client.NewTasks(u, "rl", client.TasksOptions{}).Plan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Digest != r.end.Digest || pl.Segments != r.end.Segments || pl.DamagedSegments != 0 {
			t.Errorf("node %d's plan: digest %s, %d segments (%d damaged); its replay: digest %s, %d segments",
				k, pl.Digest, pl.Segments, pl.DamagedSegments, r.end.Digest, r.end.Segments)
		}
		if k == 0 {
			replay, plan = r, pl
			continue
		}
		if r.end != replay.end || !slices.EqualFunc(r.leases, replay.leases, func(a, b taskReplayLease) bool {
			return a.Lease == b.Lease && a.Generator == b.Generator && a.Step == b.Step && slices.Equal(a.Prompts, b.Prompts)
		}) || !slices.EqualFunc(r.steps, replay.steps, slices.Equal) {
			t.Errorf("node %d's replay differs from node 0's: %+v, %d leases, %d steps; node 0: %+v, %d leases, %d steps",
				k, r.end, len(r.leases), len(r.steps), replay.end, len(replay.leases), len(replay.steps))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("the plan: pass %d, %d passes done, %d counted, %d redrawn, %d rested, %d retired, %d expired, %d leases, %d steps full, %d segments of %d bytes",
		plan.Pass, plan.PassesDone, plan.Counted, plan.Redrawn, plan.Rested, plan.Retired, plan.Expired, plan.Leases, plan.StepsFull, plan.Segments, plan.LogBytes)
	if uint64(len(replay.steps)) != plan.StepsFull || uint64(len(replay.leases)) != plan.Leases {
		t.Fatalf("the replay made %d leases and %d steps; the plan %d and %d", len(replay.leases), len(replay.steps), plan.Leases, plan.StepsFull)
	}

	// The trainer's steps, across its restart, are the replay's.
	got := map[uint64][]string{}
	trainerLost := 0
	var trainedAt []int64 // by step − 1: when the trainer first said it consumed the steps below it
	for _, e := range readTaskLog(t, trainerLog) {
		switch e.Ev {
		case "lost":
			trainerLost++
		case "trained":
			if e.Step == uint64(len(trainedAt))+1 {
				trainedAt = append(trainedAt, e.Sent)
			}
		case "step":
			if prev, ok := got[e.Step]; ok && !slices.Equal(prev, e.Keys) {
				t.Errorf("the trainer read step %d twice (across its restart), with other prompts", e.Step)
			}
			got[e.Step] = e.Keys
		}
	}
	for n := range uint64(taskSteps) {
		switch keys, ok := got[n]; {
		case !ok:
			t.Errorf("the trainer never logged step %d", n)
		case n >= uint64(len(replay.steps)) || !slices.Equal(keys, replay.steps[n]):
			t.Errorf("the trainer's step %d is not the replay's", n)
		}
	}
	if len(got) != taskSteps {
		t.Errorf("the trainer logged %d steps, want %d", len(got), taskSteps)
	}

	// Every full step, as GET /tasks/{job}/steps/{n} serves it: exactly B
	// prompts, the replay's, each counted at most once a pass.
	id := make(map[string]int, ix.NumSamples())
	for i := range ix.NumSamples() {
		id[ix.SampleKey(i)] = i
	}
	type counting struct {
		q    int
		pass uint32
	}
	countedBy := map[counting]string{} // → the lease
	leaseStep := map[string]uint64{}
	for _, l := range replay.leases {
		leaseStep[l.Lease] = l.Step
	}
	for n := range plan.StepsFull {
		s, err := client.NewTasks(urls[int(n)%len(urls)], "rl", client.TasksOptions{}).Step(ctx, n)
		if err != nil {
			t.Fatalf("step %d: %v", n, err)
		}
		keys := make([]string, len(s.Prompts))
		for i, c := range s.Prompts {
			keys[i] = c.Key
			k := counting{c.ID, c.Pass}
			if l, ok := countedBy[k]; ok {
				t.Errorf("prompt %s counted twice in pass %d: by leases %s and %s", c.Key, c.Pass, l, c.Lease)
			}
			countedBy[k] = c.Lease
			if id[c.Key] != c.ID {
				t.Errorf("step %d: prompt %s has ID %d in the step, %d in the index", n, c.Key, c.ID, id[c.Key])
			}
			// The answer as its generator sent it, for its lease's step.
			want := taskScores(c.ID, leaseStep[c.Lease])
			if ls, ok := leaseStep[c.Lease]; !ok || c.Version != uint32(ls) || !slices.EqualFunc(c.Scores, want, func(a float32, b float64) bool { return float64(a) == b }) {
				t.Errorf("step %d: prompt %s counted by lease %s (step %d) with version %d, scores %v; its generator sent version %d, scores %v",
					n, c.Key, c.Lease, ls, c.Version, c.Scores, ls, want)
			}
		}
		if len(keys) != taskStep || !slices.Equal(keys, replay.steps[n]) {
			t.Errorf("step %d holds %d prompts, want %d, the replay's", n, len(keys), taskStep)
		}
	}

	// The generators' leases are the replay's.
	held := map[string]*taskHeld{}
	logs, _ := filepath.Glob(filepath.Join(dir, "gen-*.jsonl"))
	genLost := 0
	for _, path := range logs {
		for _, e := range readTaskLog(t, path) {
			switch e.Ev {
			case "lost":
				genLost++
			case "lease":
				made, err := time.Parse(time.RFC3339Nano, e.Expires)
				if err != nil {
					t.Fatalf("%s: lease %s expires %q: %v", path, e.Lease, e.Expires, err)
				}
				h := &taskHeld{lease: e, deadline: made.UnixMilli(), made: made.Add(-taskTTL).UnixMilli()}
				if prev := held[e.Lease]; prev != nil {
					// Taken up again from the open leases by the restarted
					// generator: the prompts not answered, all of them.
					if e.From != "open" || !slices.Equal(prev.lease.Keys, e.Keys) {
						t.Errorf("%s: lease %s logged twice: %+v, then %+v", path, e.Lease, prev.lease, e)
					}
					h = prev
					h.loggedBy2 = true
				}
				held[e.Lease] = h
			case "answer":
				h := held[e.Lease]
				if h == nil {
					t.Fatalf("%s: an answer to lease %s, never logged", path, e.Lease)
				}
				h.answered = h.answered || e.Status == "ok"
				h.refused = h.refused || e.Status == "expired"
				if h.sent == 0 || e.Sent < h.sent {
					h.sent = e.Sent
				}
			case "samples":
				held[e.Lease].samples = true
				if e.Members != len(held[e.Lease].lease.Keys) {
					t.Errorf("lease %s's samples: %d members for %d prompts (a .txt each)", e.Lease, e.Members, len(held[e.Lease].lease.Keys))
				}
			}
		}
	}
	byName := map[string]int{}
	for i, l := range replay.leases {
		byName[l.Lease] = i
	}
	// No lease beyond the window: a lease made at m is for a step below
	// the trainer's then (at most the steps it had said it consumed by m:
	// a record's time is never before its request was sent) plus ahead.
	for name, h := range held {
		trainer, _ := slices.BinarySearch(trainedAt, h.made+1)
		if h.lease.Step >= uint64(trainer+taskAhead) {
			t.Errorf("lease %s, made at %d, is for step %d; the trainer had said it consumed at most %d steps then, and the window is %d steps",
				name, h.made, h.lease.Step, trainer, taskAhead)
		}
	}
	if plan.StepsFull > taskSteps+taskAhead {
		t.Errorf("%d steps full, %d ahead of the trainer's last", plan.StepsFull, plan.StepsFull-taskSteps)
	}
	var answered, refused, unanswered, samples, takenUp int
	for name, h := range held {
		i, ok := byName[name]
		if !ok {
			t.Errorf("lease %s, logged by %s, is not in the replay", name, h.lease.Gen)
			continue
		}
		l := replay.leases[i]
		if l.Generator != h.lease.Gen || l.Step != h.lease.Step || !slices.Equal(l.Prompts, h.lease.Keys) {
			t.Errorf("lease %s as %s logged it (step %d, %d prompts) is not the replay's (%s, step %d, %d prompts)",
				name, h.lease.Gen, h.lease.Step, len(h.lease.Keys), l.Generator, l.Step, len(l.Prompts))
		}
		switch {
		case h.answered:
			answered++
		case h.refused:
			refused++
		default:
			unanswered++
		}
		if h.samples {
			samples++
		}
		if h.loggedBy2 || h.lease.From == "open" {
			takenUp++
		}
	}
	t.Logf("%d leases, %d of them logged by the generators: %d answered, %d refused as expired, %d never answered; %d read; %d taken up from the open leases; connections lost: %d the generators', %d the trainer's",
		len(replay.leases), len(held), answered, refused, unanswered, samples, takenUp, genLost, trainerLost)
	if t.Failed() {
		t.FailNow()
	}

	// Each prompt's course, from the replay's leases and the generators'
	// answers: the plan's own rules, one prompt at a time (its verdicts
	// depend on its answers alone).
	sims := make([]taskSim, ix.NumSamples())
	last := make([]int, ix.NumSamples()) // the lease (index in the replay, + 1) last holding it
	var simCounted, simRedrawn, simRested, simRetired, timeChecks, timeUnknown int
	for i, l := range replay.leases {
		h := held[l.Lease]
		for pos, key := range l.Prompts {
			q, ok := id[key]
			if !ok {
				t.Fatalf("lease %s holds %q, not a prompt of the index", l.Lease, key)
			}
			s := &sims[q]
			if s.retired {
				t.Errorf("prompt %s leased by %s after it was retired", key, l.Lease)
			}
			if h != nil && h.lease.Passes[pos] != uint32(s.served) {
				t.Errorf("lease %s holds prompt %s for pass %d; its answers put it in pass %d", l.Lease, key, h.lease.Passes[pos], s.served)
			}
			// Leased only when no lease held it: the last one answered
			// it, or was past its deadline.
			if j := last[q] - 1; j >= 0 {
				prev := held[replay.leases[j].Lease]
				switch {
				case h == nil || prev == nil:
					timeUnknown++
				case prev.answered:
					timeChecks++
					if h.made+1 <= prev.sent && h.made < prev.deadline {
						t.Errorf("prompt %s leased by %s (made %d) while lease %s held it: answered from %d, its deadline %d",
							key, l.Lease, h.made, replay.leases[j].Lease, prev.sent, prev.deadline)
					}
				default:
					timeChecks++
					if h.made < prev.deadline {
						t.Errorf("prompt %s leased by %s (made %d) while lease %s, never answered, held it until %d",
							key, l.Lease, h.made, replay.leases[j].Lease, prev.deadline)
					}
				}
			}
			last[q] = i + 1
			if h == nil || !h.answered {
				continue
			}
			scores := taskScores(q, l.Step)
			flat, solved := true, true
			for _, v := range scores {
				flat = flat && v == scores[0]
				solved = solved && v >= 0.5
			}
			if solved {
				s.solves++
			}
			switch {
			case !flat:
				s.outcome = append(s.outcome, "counted by "+l.Lease)
				s.served, s.redraws = s.served+1, 0
				simCounted++
			case s.redraws < taskRedraws:
				s.redraws++
				simRedrawn++
			default:
				s.outcome = append(s.outcome, "rested")
				s.served, s.redraws = s.served+1, 0
				simRested++
			}
			if s.solves >= taskRetire {
				s.retired, s.retiredIn = true, s.served
				simRetired++
			}
		}
	}
	// A lease not answered (its generator killed holding it, its answer
	// refused as late, or its response lost with a node) expired: its
	// prompts went to the front, and were leased again in its order. But
	// for one whose deadline came less than a TTL before the run's last
	// lease: the run may have ended before it expired, or before its
	// prompts were leased again.
	var lastMade int64
	for _, h := range held {
		lastMade = max(lastMade, h.made)
	}
	expired, late := 0, 0
	for i, l := range replay.leases {
		h := held[l.Lease]
		if h != nil && h.answered {
			continue
		}
		if h != nil && h.deadline > lastMade-taskTTL.Milliseconds() {
			late += len(l.Prompts)
			continue
		}
		expired += len(l.Prompts)
		at := 0
		for _, later := range replay.leases[i+1:] {
			for _, key := range later.Prompts {
				if at < len(l.Prompts) && key == l.Prompts[at] {
					at++
				}
			}
		}
		if at < len(l.Prompts) {
			t.Errorf("lease %s, not answered: its prompts were not leased again in its order (%d of %d were)", l.Lease, at, len(l.Prompts))
		}
	}
	if plan.Expired < expired || plan.Expired > expired+late {
		t.Errorf("%d prompts in leases not answered (%d more in leases whose deadline came at the run's end); the plan's expired: %d", expired, late, plan.Expired)
	}
	t.Logf("leases of a prompt after its last: %d checked against answers' and deadlines' times, %d not (a lease no generator logged)", timeChecks, timeUnknown)
	if simCounted != plan.Counted || simRedrawn != plan.Redrawn || simRested != plan.Rested || simRetired != plan.Retired {
		t.Errorf("the answers count %d, redraw %d, rest %d, retire %d; the plan says %d, %d, %d, %d",
			simCounted, simRedrawn, simRested, simRetired, plan.Counted, plan.Redrawn, plan.Rested, plan.Retired)
	}

	// 0 lost, 0 counted twice: every prompt of every pass done was counted
	// in it once (in the steps, by the lease its answers say), rested in
	// it, or retired before it.
	if plan.PassesDone < 1 || plan.Pass < 1 {
		t.Errorf("the run covered %d passes whole (pass %d drawn): want pass 0 whole and part of pass 1", plan.PassesDone, plan.Pass)
	}
	lost, inSteps := 0, 0
	var inPass [2]int
	for q := range sims {
		s := &sims[q]
		for pass := range int(plan.PassesDone) {
			switch {
			case pass < len(s.outcome):
			case s.retired && s.retiredIn <= pass:
			default:
				if lost < 10 {
					t.Errorf("prompt %s lost in pass %d: its course %v, retired %v", ix.SampleKey(q), pass, s.outcome, s.retired)
				}
				lost++
			}
		}
		for pass, o := range s.outcome {
			if strings.HasPrefix(o, "counted") && pass < 2 {
				inPass[pass]++
			}
		}
	}
	for k := range countedBy {
		o := sims[k.q].outcome
		if int(k.pass) >= len(o) || o[k.pass] != "counted by "+countedBy[k] {
			t.Errorf("prompt %d counted in pass %d by lease %s in the steps; its answers say %v", k.q, k.pass, countedBy[k], o)
		}
		inSteps++
	}
	if inSteps != int(plan.StepsFull)*taskStep {
		t.Errorf("%d counted prompts in the full steps, want %d", inSteps, int(plan.StepsFull)*taskStep)
	}
	if lost > 0 {
		t.Errorf("%d prompts lost", lost)
	}
	t.Logf("counted in pass 0: %d, in pass 1: %d; retired %d; %d prompts lost", inPass[0], inPass[1], simRetired, lost)
}
