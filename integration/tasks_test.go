package integration

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/seeded"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// The task run's shape: prompts, the step, a lease, the generators, and
// the steps the trainer consumes (one pass of the prompts is about 75
// steps: a fifth of them never count, see taskScores).
const (
	taskPrompts    = 100_000
	taskStep       = 1024
	taskLease      = 256
	taskGenerators = 8
	taskAhead      = 8
	taskSteps      = 100
	taskTTL        = 2 * time.Second
	taskRedraws    = 1
	taskRetire     = 2
	taskN          = 4 // answers a prompt
	// taskTrain is the time the trainer trains a step for (a sleep):
	// longer than the generators take to fill one, so that they run to
	// the window's edge, ahead steps ahead of it.
	taskTrain = 120 * time.Millisecond
)

// The child processes' environment: which role the test binary plays,
// and its parameters.
const (
	taskRoleEnv  = "BRAND_TASK_ROLE"  // "generator" or "trainer"
	taskURLsEnv  = "BRAND_TASK_URLS"  // the nodes, comma-separated
	taskNameEnv  = "BRAND_TASK_NAME"  // the generator's name
	taskLogEnv   = "BRAND_TASK_LOG"   // the role's log of JSON lines
	taskStateEnv = "BRAND_TASK_STATE" // the trainer's state: its next step
	taskHoldEnv  = "BRAND_TASK_HOLD"  // a generator holds its Nth lease unanswered
)

// TestTaskStreamKills is task streams' promise (docs/tasks.md) held
// against real processes: three `brand serve` nodes of a cluster over
// one MinIO bucket of 100,000 prompts (tar shards indexed in place), eight
// generators leasing 256 prompts at a time at most eight steps ahead of
// one trainer of 1,024-prompt steps, each a process of its own (this test
// binary run again, taskRoleEnv naming its role). The trainer trains each
// step for a while, so the generators run to the window's edge. Faults,
// each while the others run on:
//
//   - gen-0 is killed (SIGKILL) holding a lease it logged and never
//     answered: the lease expires after the job's 2 s TTL and its prompts
//     go to the front; gen-0 starts again once the lease is past its
//     deadline.
//   - gen-1 is killed the same way and started again at once: it takes
//     up the lease it held (GET …/leases?generator=) and answers it.
//   - The trainer is killed and resumed from its state file.
//   - Node 1 is killed and restarted while the generators and the trainer
//     talk to all three, each request to the next node and, when a
//     connection is lost, again to another (a lease whose answer was lost
//     is taken up from the generator's open leases).
//
// The policy is a curriculum that retires a prompt at its second solve,
// with dynamic sampling (one redraw): a tenth of the prompts always fail
// (drawn again, then rested, each pass), a tenth always pass (retired in
// pass 0), the others pass at a rate rising with the step they are
// answered for (taskScores). The run covers pass 0 whole and part of
// pass 1: about 30 s on a 2-core machine, of which 2 s make the dataset
// and 7 s replay and check the run.
//
// Then (checkTaskRun): every node's replay makes the decisions its plan
// made, with no divergence, and the three replays are one; the trainer's
// steps, across its restart, are the replay's; every step holds exactly
// 1,024 prompts; a prompt counts at most once a pass; every lease a
// generator logged is the replay's, and none is for a step beyond the
// window; a prompt is never leased while another lease holds it (it was
// answered before, or that lease's deadline had passed); the prompts of
// every lease not answered were leased again, in its order; and each
// prompt's answers, replayed here from the generators' logs alone, count,
// redraw, rest and retire it exactly as the plan's counters and steps
// say: every prompt of pass 0 was counted in it once, rested in it or
// retired — 0 lost, 0 counted twice.
func TestTaskStreamKills(t *testing.T) {
	if role := os.Getenv(taskRoleEnv); role != "" {
		taskChild(t, role)
		return
	}
	began := time.Now()
	p := promptShards(t, taskPrompts, 10)
	t.Logf("indexed %d prompts in %v", taskPrompts, time.Since(began).Round(time.Millisecond))

	const nodes = 3
	cs := newClusterSetup(t, p, nodes, "http", "peer secret of the task streams test cluster")
	procs := make([]*clusterProc, nodes)
	for k := range nodes {
		procs[k] = cs.proc(k, p, "--cache-size", "64MiB", "--cache-prefault=false",
			"--peers", strings.Join(cs.urls, ","), "--self", strconv.Itoa(k), "--peer-secret-file", cs.secret,
			"--leave-timeout", "0") // static members: a node stopped has no cluster to agree with
	}
	startProcs(t, procs, cs.bin, cs.env, "")
	t.Logf("3 nodes up at %v", time.Since(began).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tk := client.NewTasks(cs.urls[0], "rl", client.TasksOptions{})
	spec := map[string]any{"seed": 7, "step": taskStep, "policy": "curriculum", "ahead": taskAhead, "ttl": taskTTL.String(),
		"redraws": taskRedraws, "retire": taskRetire, "max_lease": taskLease}
	if _, made, err := tk.Make(ctx, spec); err != nil || !made {
		t.Fatalf("making the task job: made %v, %v", made, err)
	}

	dir := t.TempDir()
	urls := strings.Join(cs.urls, ",")
	trainerLog, trainerState := filepath.Join(dir, "trainer.jsonl"), filepath.Join(dir, "trainer.state")
	trainer := &taskProc{name: "trainer", env: []string{taskRoleEnv + "=trainer", taskURLsEnv + "=" + urls,
		taskLogEnv + "=" + trainerLog, taskStateEnv + "=" + trainerState}, out: filepath.Join(dir, "trainer.out")}
	gens := make([]*taskProc, taskGenerators)
	for g := range gens {
		name := fmt.Sprint("gen-", g)
		gens[g] = &taskProc{name: name, env: []string{taskRoleEnv + "=generator", taskURLsEnv + "=" + urls, taskNameEnv + "=" + name,
			taskLogEnv + "=" + filepath.Join(dir, name+".jsonl")}, out: filepath.Join(dir, name+".out")}
	}
	// gen-0's 12th lease and gen-1's 20th are held unanswered, then the
	// processes killed.
	gens[0].env = append(gens[0].env, taskHoldEnv+"=12")
	gens[1].env = append(gens[1].env, taskHoldEnv+"=20")
	all := append([]*taskProc{trainer}, gens...)
	t.Cleanup(func() {
		for _, c := range all {
			c.kill()
		}
		if t.Failed() {
			for _, c := range all {
				t.Logf("%s's output:\n%s", c.name, tail(c.out))
			}
		}
	})
	for _, c := range all {
		c.start(t)
	}

	// The faults, each when the run reaches it.
	trained := func() uint64 {
		b, _ := os.ReadFile(trainerState)
		n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("waiting for %s: %v (trainer at step %d)", what, ctx.Err(), trained())
			}
			for _, c := range all {
				if c.exitedEarly() {
					t.Fatalf("waiting for %s: %s exited (%v):\n%s", what, c.name, c.waitErr, tail(c.out))
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	holding := func(g *taskProc) string {
		if _, err := os.Stat(g.logPath()); err != nil {
			return "" // not started yet
		}
		for _, e := range readTaskLog(t, g.logPath()) {
			if e.Ev == "hold" {
				return e.Lease
			}
		}
		return ""
	}
	var held0, held1 string
	waitFor("gen-0 to hold a lease", func() bool { held0 = holding(gens[0]); return held0 != "" })
	gens[0].kill()
	killedGen := time.Now()
	t.Logf("gen-0 killed holding lease %s at %v, trainer at step %d", held0, time.Since(began).Round(time.Millisecond), trained())

	// gen-1 again at once: it takes up the lease it held, and answers it.
	waitFor("gen-1 to hold a lease", func() bool { held1 = holding(gens[1]); return held1 != "" })
	gens[1].kill()
	gens[1].env = slices.DeleteFunc(gens[1].env, func(e string) bool { return strings.HasPrefix(e, taskHoldEnv+"=") })
	restarted1 := time.Now()
	gens[1].start(t)
	t.Logf("gen-1 killed holding lease %s and started again at %v, trainer at step %d", held1, time.Since(began).Round(time.Millisecond), trained())

	waitFor("the trainer at step 30", func() bool { return trained() >= 30 })
	trainer.kill()
	t.Logf("trainer killed at step %d, %v", trained(), time.Since(began).Round(time.Millisecond))
	time.Sleep(200 * time.Millisecond)
	trainer.start(t)

	// gen-0 again, once its held lease is past its deadline: it takes up
	// its open leases first, and finds none to answer in time.
	if d := taskTTL + 200*time.Millisecond - time.Since(killedGen); d > 0 {
		time.Sleep(d)
	}
	gens[0].env = slices.DeleteFunc(gens[0].env, func(e string) bool { return strings.HasPrefix(e, taskHoldEnv+"=") })
	gens[0].start(t)

	waitFor("the trainer at step 50", func() bool { return trained() >= 50 })
	procs[1].kill()
	t.Logf("node 1 killed at step %d, %v", trained(), time.Since(began).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)
	if err := procs[1].launch(cs.bin, cs.env); err != nil {
		t.Fatal(err)
	}
	t.Logf("node 1 up again at step %d, %v", trained(), time.Since(began).Round(time.Millisecond))

	waitFor("the trainer's end", func() bool { return trainer.exited() })
	if trainer.waitErr != nil {
		t.Fatalf("the trainer: %v\n%s", trainer.waitErr, tail(trainer.out))
	}
	for _, g := range gens {
		g.stop(t)
	}
	tookUp, deadline, asked := false, time.Time{}, int64(0)
	for _, e := range readTaskLog(t, gens[1].logPath()) {
		switch {
		case e.Ev == "lease" && e.Lease == held1 && e.From == "lease":
			deadline, _ = time.Parse(time.RFC3339Nano, e.Expires)
		case e.Ev == "lease" && e.Lease == held1 && e.From == "open":
			tookUp = true
		case e.Ev == "open" && asked == 0 && e.Sent >= restarted1.UnixMilli():
			asked = e.Sent
		}
	}
	if !tookUp {
		if asked < deadline.UnixMilli() {
			t.Errorf("gen-1, started again, did not take up lease %s, open until %s, from its open leases at %s",
				held1, deadline.Format(time.StampMilli), time.UnixMilli(asked).Format(time.StampMilli))
		} else {
			// A loaded machine: its start outlasted the lease, which
			// expired, as checkTaskRun holds it to.
			t.Logf("gen-1, started again, asked for its open leases after lease %s's deadline", held1)
		}
	}
	t.Logf("run done at %v", time.Since(began).Round(time.Millisecond))

	checkTaskRun(t, ctx, cs.urls, dir, trainerLog, p.index(t))
	t.Logf("checked at %v", time.Since(began).Round(time.Millisecond))
}

// promptShards puts n prompts in shards WebDataset tar shards into a
// fresh bucket on a real MinIO and indexes them (dataset.IndexShards, as
// `brand index` does): a prompt is one small text member, so 100,000
// cost 100 MB of tar and a second or two, where a packed tree of
// 200,000 files took 10–50 s on a 2-core machine.
func promptShards(t *testing.T, n, shards int) *packed {
	t.Helper()
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	if err := srv.MakeBucket(ctx, "train"); err != nil {
		t.Fatal(err)
	}
	p := &packed{server: srv, url: "s3://train/prompts"}
	var err error
	if p.store, err = s3backend.Open(ctx, p.url, srv.Config()); err != nil {
		t.Fatal(err)
	}
	per := (n + shards - 1) / shards
	for s := range shards {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for i := s * per; i < min(n, (s+1)*per); i++ {
			text := promptText(i)
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("prompt/%06d.txt", i), Mode: 0o644, Size: int64(len(text)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(text); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		putBytes(t, p.store, fmt.Sprintf("shards/prompts-%04d.tar", s), buf.Bytes())
	}
	res, err := dataset.IndexShards(ctx, p.store, dataset.IndexOptions{Prefix: "shards/", Name: "prompts"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Index.NumSamples(); got != n {
		t.Fatalf("indexed %d prompts, want %d", got, n)
	}
	p.bytes = res.Index.TotalBytes()
	return p
}

// promptText is prompt i's text, its key prompt/%06d.
func promptText(i int) []byte { return fmt.Appendf(nil, "prompt %d: what is %d + %d?", i, i, i%97) }

// taskProc is a generator's or the trainer's process: this test binary
// in a role.
type taskProc struct {
	name, out string
	env       []string
	cmd       *exec.Cmd
	done      chan struct{}
	waitErr   error
	killed    bool
}

func (c *taskProc) logPath() string {
	for _, e := range c.env {
		if v, ok := strings.CutPrefix(e, taskLogEnv+"="); ok {
			return v
		}
	}
	return ""
}

func (c *taskProc) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(c.out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestTaskStreamKills$", "-test.count=1", "-test.v")
	c.cmd.Env = append(os.Environ(), c.env...)
	c.cmd.Stdout, c.cmd.Stderr = f, f
	if err := c.cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	c.done, c.killed, c.waitErr = make(chan struct{}), false, nil
	go func() {
		c.waitErr = c.cmd.Wait()
		f.Close()
		close(c.done)
	}()
}

func (c *taskProc) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// exitedEarly reports whether the process ended without being killed.
func (c *taskProc) exitedEarly() bool {
	return c.done != nil && !c.killed && c.exited() && c.waitErr != nil
}

// kill ends the process at once (SIGKILL).
func (c *taskProc) kill() {
	if c.cmd == nil || c.exited() {
		return
	}
	c.killed = true
	_ = c.cmd.Process.Kill()
	<-c.done
}

// stop asks the process to end (SIGTERM: a generator answers the lease
// it holds, then exits) and fails the test unless it exits cleanly.
func (c *taskProc) stop(t *testing.T) {
	t.Helper()
	if c.exited() {
		t.Errorf("%s exited before it was stopped (%v):\n%s", c.name, c.waitErr, tail(c.out))
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.kill()
		t.Errorf("%s did not stop within 30 s:\n%s", c.name, tail(c.out))
		return
	}
	if c.waitErr != nil {
		t.Errorf("%s: %v\n%s", c.name, c.waitErr, tail(c.out))
	}
}

func readString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// taskScores are the toy model's scores of prompt id answered for step:
// taskN answers, each passing (1) or not (0). A tenth of the prompts
// always fail and a tenth always pass (flat groups: dynamic sampling
// draws them again, then rests them; the ones that pass are retired at
// their second solve); the others pass at a rate of their own, rising
// with the step.
func taskScores(id int, step uint64) []float64 {
	out := make([]float64, taskN)
	switch id % 10 {
	case 0:
		return out
	case 1:
		for j := range out {
			out[j] = 1
		}
		return out
	}
	rate := 0.1 + float64(seeded.Mix64(uint64(id))%60)/100 + 0.004*float64(step)
	for j := range out {
		u := float64(seeded.Mix64(uint64(id)<<24^step<<8^uint64(j)^0x5eed)>>11) / (1 << 53)
		if u < rate {
			out[j] = 1
		}
	}
	return out
}

// taskEvent is a line of a generator's or the trainer's log.
type taskEvent struct {
	Ev      string   `json:"ev"` // open (its open leases asked), lease, hold, samples, answer; step, trained; lost (a connection)
	Lease   string   `json:"lease,omitempty"`
	From    string   `json:"from,omitempty"` // a lease: "lease", or "open" (taken up from the open leases)
	Gen     string   `json:"gen,omitempty"`
	Step    uint64   `json:"step"`
	Expires string   `json:"expires,omitempty"`
	Keys    []string `json:"keys,omitempty"`
	IDs     []int    `json:"ids,omitempty"`
	Passes  []uint32 `json:"passes,omitempty"`
	// An answer: "ok", or "expired" (409); what it did.
	Status  string `json:"status,omitempty"`
	Applied int    `json:"applied,omitempty"`
	Repeats int    `json:"repeats,omitempty"`
	Members int    `json:"members,omitempty"`
	Sent    int64  `json:"sent,omitempty"` // when the answer or the trainer's step was first sent, or the open leases answered, Unix ms
}

// taskNodes are the cluster's nodes as a task job's client, asked in
// turn.
type taskNodes struct {
	tks  []*client.Tasks
	next atomic.Uint32
	lost func(err error) // told of each connection lost
}

func newTaskNodes(urls string) *taskNodes {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 30 * time.Second}
	n := &taskNodes{}
	for _, u := range strings.Split(urls, ",") {
		n.tks = append(n.tks, client.NewTasks(u, "rl", client.TasksOptions{HTTP: hc}))
	}
	return n
}

// pick is the next node.
func (n *taskNodes) pick() *client.Tasks { return n.tks[int(n.next.Add(1))%len(n.tks)] }

// lost reports whether err is a connection lost (no answer from the
// node, or half of one), not the gateway's refusal.
func lost(err error) bool {
	_, refused := errors.AsType[*client.APIError](err)
	return err != nil && !refused
}

// retry calls f with node after node until it returns other than a lost
// connection or a 503, for a minute at most: for requests whose repeat
// changes nothing (reads, answers, the trainer's step).
func (n *taskNodes) retry(ctx context.Context, f func(tk *client.Tasks) error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := f(n.pick())
		if lost(err) && ctx.Err() == nil {
			n.lost(err)
		}
		ae, refused := errors.AsType[*client.APIError](err)
		if err == nil || (refused && ae.StatusCode != http.StatusServiceUnavailable) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// taskLog is a role's log: JSON lines, appended.
type taskLog struct{ f *os.File }

func (l taskLog) put(t *testing.T, e taskEvent) {
	b, _ := json.Marshal(e)
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// taskChild plays role in a child process.
func taskChild(t *testing.T, role string) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	f, err := os.OpenFile(os.Getenv(taskLogEnv), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A process killed in the middle of a line left it cut: the next
	// starts on a line of its own.
	if b := []byte(readString(f.Name())); len(b) > 0 && b[len(b)-1] != '\n' {
		if _, err := f.Write([]byte{'\n'}); err != nil {
			t.Fatal(err)
		}
	}
	nodes := newTaskNodes(os.Getenv(taskURLsEnv))
	nodes.lost = func(err error) { taskLog{f}.put(t, taskEvent{Ev: "lost", Status: err.Error()}) }
	switch role {
	case "generator":
		hold, _ := strconv.Atoi(os.Getenv(taskHoldEnv))
		taskGenerator(t, ctx, nodes, os.Getenv(taskNameEnv), hold, taskLog{f})
	case "trainer":
		taskTrainer(t, ctx, nodes, os.Getenv(taskStateEnv), taskLog{f})
	default:
		t.Fatalf("%s=%q", taskRoleEnv, role)
	}
}

// taskGenerator leases, reads (every eighth lease's samples) and answers
// until ctx ends, logging each lease before it answers it. It first takes
// up its open leases, and again when a lease's answer was lost: the lease
// may have been made. With hold > 0 it holds its hold-th lease, never
// answering it, until killed.
func taskGenerator(t *testing.T, ctx context.Context, nodes *taskNodes, gen string, hold int, log taskLog) {
	done := map[string]bool{}
	leases := 0
	serve := func(l api.TaskLease, from string) {
		done[l.Lease] = true
		leases++
		e := taskEvent{Ev: "lease", Lease: l.Lease, From: from, Gen: l.Generator, Step: l.Step, Expires: l.Expires}
		for _, q := range l.Prompts {
			e.Keys, e.IDs, e.Passes = append(e.Keys, q.Key), append(e.IDs, q.ID), append(e.Passes, q.Pass)
		}
		log.put(t, e)
		if leases == hold {
			log.put(t, taskEvent{Ev: "hold", Lease: l.Lease})
			<-ctx.Done()
			t.Fatalf("%s: stopped holding lease %s: it was to be killed", gen, l.Lease)
		}
		// The answers are sent whatever ctx says: a generator stopped
		// answers the lease it holds first.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if leases%8 == 0 {
			members, err := taskSampleKeys(actx, nodes, l)
			switch ae, ok := errors.AsType[*client.APIError](err); {
			case ok && ae.StatusCode == http.StatusConflict:
				// Expired on its way here: the answer will say so.
			case err != nil:
				t.Fatalf("%s: lease %s's samples: %v", gen, l.Lease, err)
			default:
				log.put(t, taskEvent{Ev: "samples", Lease: l.Lease, Members: members})
			}
		}
		rs := make([]api.TaskResult, len(l.Prompts))
		for i, q := range l.Prompts {
			rs[i] = api.TaskResult{Key: q.Key, Scores: taskScores(q.ID, l.Step), Version: uint32(l.Step)}
		}
		var a api.TaskAnswered
		sent := time.Now().UnixMilli()
		err := nodes.retry(actx, func(tk *client.Tasks) (err error) {
			a, err = tk.Answer(actx, l.Lease, rs)
			return err
		})
		switch ae, ok := errors.AsType[*client.APIError](err); {
		case ok && ae.StatusCode == http.StatusConflict:
			log.put(t, taskEvent{Ev: "answer", Lease: l.Lease, Status: "expired", Sent: sent})
		case err != nil:
			t.Fatalf("%s: answering lease %s: %v", gen, l.Lease, err)
		default:
			if a.Applied+a.Repeats != len(rs) {
				t.Fatalf("%s: lease %s's %d answers: %+v", gen, l.Lease, len(rs), a)
			}
			log.put(t, taskEvent{Ev: "answer", Lease: l.Lease, Status: "ok", Applied: a.Applied, Repeats: a.Repeats, Sent: sent})
		}
	}
	takeUp := func() {
		var open []api.TaskLease
		err := nodes.retry(ctx, func(tk *client.Tasks) (err error) {
			open, err = tk.OpenLeases(ctx, gen)
			return err
		})
		if err != nil && ctx.Err() == nil {
			t.Fatalf("%s: its open leases: %v", gen, err)
		}
		log.put(t, taskEvent{Ev: "open", Sent: time.Now().UnixMilli()})
		for _, l := range open {
			if !done[l.Lease] {
				serve(l, "open")
			}
		}
	}
	takeUp()
	for ctx.Err() == nil {
		// A lease asked is served, stopped or not: its prompts would
		// wait out the TTL otherwise.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		l, err := nodes.pick().Lease(lctx, gen, taskLease)
		cancel()
		ae, refused := errors.AsType[*client.APIError](err)
		switch {
		case err == nil:
			serve(l, "lease")
		case refused && ae.StatusCode == http.StatusServiceUnavailable:
			time.Sleep(5 * time.Millisecond) // the window is full
		case refused:
			t.Fatalf("%s: leasing: %v", gen, err)
		default:
			nodes.lost(err)
			time.Sleep(20 * time.Millisecond) // a node lost: was the lease made?
			takeUp()
		}
	}
}

// taskSampleKeys reads lease l's samples and checks they are its
// prompts', in its order: it answers the tar's members.
func taskSampleKeys(ctx context.Context, nodes *taskNodes, l api.TaskLease) (int, error) {
	var keys []string
	members := 0
	err := nodes.retry(ctx, func(tk *client.Tasks) error {
		keys, members = keys[:0], 0
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(tk.Samples(ctx, l.Lease, pw)) }()
		defer pr.Close()
		tr := tar.NewReader(pr)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			members++
			key := strings.TrimSuffix(h.Name, filepath.Ext(h.Name))
			var i int
			if _, err := fmt.Sscanf(key, "prompt/%d", &i); err != nil {
				return fmt.Errorf("lease %s's samples: member %s: %w", l.Lease, h.Name, err)
			}
			if b, err := io.ReadAll(tr); err != nil || !bytes.Equal(b, promptText(i)) {
				return fmt.Errorf("lease %s's samples: member %s holds %q (%v), want %q", l.Lease, h.Name, b, err, promptText(i))
			}
			if len(keys) == 0 || keys[len(keys)-1] != key {
				keys = append(keys, key)
			}
		}
	})
	if err != nil {
		return 0, err
	}
	want := make([]string, len(l.Prompts))
	for i, q := range l.Prompts {
		want[i] = q.Key
	}
	if !slices.Equal(keys, want) {
		return 0, fmt.Errorf("lease %s's samples are %d keys, not its %d prompts in order", l.Lease, len(keys), len(want))
	}
	return members, nil
}

// taskTrainer consumes steps in order from the one its state file names,
// logging each step's prompts, then telling the job, then writing its
// state, until taskSteps.
func taskTrainer(t *testing.T, ctx context.Context, nodes *taskNodes, state string, log taskLog) {
	next := uint64(0)
	if b, err := os.ReadFile(state); err == nil {
		if next, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
			t.Fatalf("trainer state %q: %v", b, err)
		}
	}
	for n := next; n < taskSteps; n++ {
		var s api.TaskStep
		err := nodes.retry(ctx, func(tk *client.Tasks) (err error) {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			s, err = tk.WaitStep(wctx, n, 5*time.Millisecond)
			return err
		})
		if err != nil {
			t.Fatalf("trainer: step %d: %v", n, err)
		}
		if s.Step != n || len(s.Prompts) != taskStep {
			t.Fatalf("trainer: asked step %d, got step %d of %d prompts", n, s.Step, len(s.Prompts))
		}
		e := taskEvent{Ev: "step", Step: n}
		for _, q := range s.Prompts {
			e.Keys, e.IDs, e.Passes = append(e.Keys, q.Key), append(e.IDs, q.ID), append(e.Passes, q.Pass)
		}
		log.put(t, e)
		time.Sleep(taskTrain)
		log.put(t, taskEvent{Ev: "trained", Step: n + 1, Sent: time.Now().UnixMilli()})
		if err := nodes.retry(ctx, func(tk *client.Tasks) error { return tk.Trained(ctx, n+1) }); err != nil {
			t.Fatalf("trainer: trained %d: %v", n+1, err)
		}
		if err := os.WriteFile(state+".new", []byte(strconv.FormatUint(n+1, 10)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(state+".new", state); err != nil {
			t.Fatal(err)
		}
	}
}

// readTaskLog reads a role's log, but for a line cut by a kill.
func readTaskLog(t *testing.T, path string) []taskEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []taskEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e taskEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // cut by a kill
		}
		out = append(out, e)
	}
	return out
}
