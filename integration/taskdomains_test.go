package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// TestTaskDomains is issue 97's post-training run against real
// processes: a task job over three prompt datasets served in place from
// MinIO (Parquet files of the same names, so their keys coincide) at
// 0.5/0.3/0.2, steps of 100, eight generators and a trainer talking to
// every node. Mid-run, 10 prompts of one domain are excluded, 60 are
// appended to another (brand index --append, the nodes' reload, POST
// …/append), the ratios move to 0.4/0.4/0.2, and a node is SIGKILLed and
// restarted. Then: every step holds each domain's share within one
// prompt by the ratios in force at it; no prompt counted twice in a pass
// of its domain; every answer acknowledged counted (0 lost), but those
// to prompts excluded since their lease; no lease asked after the
// exclusion holds an excluded prompt; the appended prompts served in
// their domain's next pass; the replay equal on every node and on a
// node started afresh after the run. On one gateway and on a cluster of
// two, the generators spread over both.
func TestTaskDomains(t *testing.T) {
	for _, nodes := range []int{1, 2} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) { taskDomainsRun(t, nodes) })
	}
}

// The domains' datasets: a Parquet file of prompts each (so the domains'
// keys coincide), sized so that each runs out within the run at its
// ratio: chat first.
var taskDomainSizes = map[string]int{"math": 2400, "code": 900, "chat": 400}

const (
	tdStep   = 100
	tdSteps  = 60
	tdLease  = 40
	tdExcl   = 15 // the trainer's step the exclusion waits for
	tdAppend = 20 // the append
	tdRatios = 25 // the ratio edit
	tdKill   = 30 // a node SIGKILLed and restarted
)

// promptParquet is a Parquet file of n prompts named name: its rows'
// text "NAME prompt I".
func promptParquet(t *testing.T, name string, n int) []byte {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	var recs []arrow.RecordBatch
	for g := 0; g < n; g += 256 {
		recs = append(recs, newRecord(sc, func(b *array.RecordBuilder) {
			for i := g; i < min(g+256, n); i++ {
				b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s prompt %d", name, i))
			}
		}))
	}
	return writeParquet(t, sc, pq.NewWriterProperties(), recs...)
}

// tdEvents is the run's account, kept by the test's generators and
// trainer.
type tdEvents struct {
	mu       sync.Mutex
	leases   []tdLeaseEvent
	answered []api.TaskLease // leases whose answers were acknowledged (applied, or repeats of a try whose answer was lost)
	excluded int             // answers acknowledged of prompts excluded since their lease
	steps    [][]api.TaskCounted
}

type tdLeaseEvent struct {
	asked   time.Time
	prompts []api.TaskPrompt
}

func taskDomainsRun(t *testing.T, nodes int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv := miniotest.ForTest(t)
	env := brandEnv(srv)
	stores := map[string]s3backend.Store{}
	var datasets []string
	for _, name := range []string{"math", "code", "chat"} {
		bucket := srv.NewBucket(t)
		st, err := s3backend.Open(ctx, "s3://"+bucket, srv.Config())
		if err != nil {
			t.Fatal(err)
		}
		putBytes(t, st, "data/part-0.parquet", promptParquet(t, name, taskDomainSizes[name]))
		if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: []format.Format{parquet.Format{}}}); err != nil {
			t.Fatal(err)
		}
		stores[name] = st
		datasets = append(datasets, "--dataset", name+"=s3://"+bucket)
	}
	cs := newClusterSetup(t, &packed{server: srv}, nodes, "http", "peer secret of the task domains test")
	procs := make([]*clusterProc, nodes)
	for k := range nodes {
		args := []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", cs.ports[k]), "--s3-endpoint", srv.URL(),
			"--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "200ms", "--cache-size", "64MiB", "--cache-prefault=false"}
		args = append(args, datasets...)
		if nodes > 1 {
			args = append(args, "--peers", strings.Join(cs.urls, ","), "--self", strconv.Itoa(k), "--peer-secret-file", cs.secret, "--leave-timeout", "0")
		}
		procs[k] = &clusterProc{k: k, url: cs.urls[k], logPath: fmt.Sprintf("%s/node%d.log", cs.dir, k), args: args}
	}
	startProcs(t, procs, cs.bin, env, "")
	// The job's log is kept in math's store: every request names it.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 30 * time.Second}
	tn := &taskNodes{lost: func(error) {}}
	for _, u := range cs.urls {
		tn.tks = append(tn.tks, client.NewTasks(u, "rl", client.TasksOptions{Dataset: "math", HTTP: hc}))
	}
	spec := map[string]any{"seed": 3, "step": tdStep, "ahead": 4, "ttl": "3s", "max_lease": tdLease,
		"domains": []map[string]any{{"dataset": "math", "ratio": 0.5}, {"dataset": "code", "ratio": 0.3}, {"dataset": "chat", "ratio": 0.2}}}
	if _, made, err := tn.tks[0].Make(ctx, spec); err != nil || !made {
		t.Fatalf("making the task job: %v, %v", made, err)
	}

	ev := &tdEvents{}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for g := range taskGenerators {
		wg.Go(func() { tdGenerator(t, runCtx, tn, fmt.Sprint("gen-", g), ev) })
	}
	// Unbuffered: the trainer waits while the run's edits and kill are
	// made at its step.
	trained := make(chan uint64)
	wg.Go(func() {
		defer close(trained)
		for n := uint64(0); n < tdSteps; n++ {
			var s api.TaskStep
			err := tn.retry(ctx, func(tk *client.Tasks) (err error) {
				wctx, cancel := context.WithTimeout(ctx, 45*time.Second)
				defer cancel()
				s, err = tk.WaitStep(wctx, n, 5*time.Millisecond)
				return err
			})
			if err != nil {
				t.Errorf("trainer: step %d: %v", n, err)
				return
			}
			ev.mu.Lock()
			ev.steps = append(ev.steps, s.Prompts)
			ev.mu.Unlock()
			if err := tn.retry(ctx, func(tk *client.Tasks) error { return tk.Trained(ctx, n+1) }); err != nil {
				t.Errorf("trainer: trained %d: %v", n+1, err)
				return
			}
			trained <- n + 1
		}
	})

	// The edits and the kill, each at its step.
	var excludedAt time.Time
	gone := map[string]bool{}
	var appended []string
	var ratioFrom uint64
	for step := range trained {
		switch step {
		case tdExcl:
			// Ten chat prompts the run has not leased yet.
			for i := 399; len(gone) < 10; i-- {
				gone[fmt.Sprintf("data/part-0/%d", i)] = true
			}
			var keys []string
			for k := range gone {
				keys = append(keys, k)
			}
			if err := tn.retry(ctx, func(tk *client.Tasks) error { _, err := tk.Exclude(ctx, "chat", keys); return err }); err != nil {
				t.Fatalf("the exclusion: %v", err)
			}
			excludedAt = time.Now()
		case tdAppend:
			putBytes(t, stores["code"], "data/part-1.parquet", promptParquet(t, "code-new", 60))
			res, err := dataset.AppendInPlace(ctx, stores["code"], stores["code"], dataset.AppendOptions{Formats: []format.Format{parquet.Format{}}})
			if err != nil {
				t.Fatal(err)
			}
			v := res.Index.ID()
			for _, p := range procs { // every node has loaded it (--index-poll)
				for deadline := time.Now().Add(30 * time.Second); ; {
					if _, body := httpGet(t, p.url+"/datasets"); strings.Contains(string(body), v) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("node %d did not load code's index %s", p.k, v)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			var e api.TaskEdited
			if err := tn.retry(ctx, func(tk *client.Tasks) (err error) { e, err = tk.Append(ctx, "code", v); return err }); err != nil || e.Appended != 60 {
				t.Fatalf("the append: %+v, %v", e, err)
			}
			for i := range 60 {
				appended = append(appended, fmt.Sprintf("data/part-1/%d", i))
			}
		case tdRatios:
			ratios := map[string]float64{"math": 0.4, "code": 0.4, "chat": 0.2}
			// Beyond the window (ahead 4): no step from it is full yet.
			for from := step + 6; ; from++ {
				_, err := tn.tks[0].EditRatios(ctx, from, ratios)
				var ae *client.APIError
				if errors.As(err, &ae) && ae.StatusCode == http.StatusConflict && ae.FirstEditableStep != nil {
					from = *ae.FirstEditableStep - 1
					continue
				}
				if err != nil {
					t.Fatalf("the ratio edit: %v", err)
				}
				ratioFrom = from
				break
			}
		case tdKill:
			p := procs[nodes-1]
			p.kill()
			time.Sleep(300 * time.Millisecond)
			if err := p.launch(cs.bin, env); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop()
	wg.Wait()
	if t.Failed() {
		return
	}

	// Every step's shares, by the ratios in force at it.
	counted := map[string]bool{}
	for n, step := range ev.steps {
		want := []float64{50, 30, 20}
		if uint64(n) >= ratioFrom {
			want = []float64{40, 40, 20}
		}
		got := map[string]int{}
		for _, p := range step {
			got[p.Dataset]++
			k := fmt.Sprintf("%s/%s/%d", p.Dataset, p.Key, p.Pass)
			if counted[k] {
				t.Fatalf("step %d: %s counted twice in its pass", n, k)
			}
			counted[k] = true
		}
		for i, name := range []string{"math", "code", "chat"} {
			if math.Abs(float64(got[name])-want[i]) >= 1 {
				t.Fatalf("step %d holds %v prompts of the domains; their shares %v (the ratio edit from step %d)", n, got, want, ratioFrom)
			}
		}
	}
	// No lease asked after the exclusion holds an excluded prompt; the
	// appended prompts are leased, of a pass after the first.
	servedNew := 0
	for _, l := range ev.leases {
		for _, p := range l.prompts {
			if p.Dataset == "chat" && gone[p.Key] && l.asked.After(excludedAt) {
				t.Fatalf("a lease asked after the exclusion holds chat's %s", p.Key)
			}
			if p.Dataset == "code" && slices.Contains(appended, p.Key) {
				if p.Pass == 0 {
					t.Fatalf("appended prompt %s leased in pass 0, the pass it was appended in", p.Key)
				}
				servedNew++
			}
		}
	}
	if servedNew == 0 {
		t.Fatal("no appended prompt leased in code's next pass")
	}
	// 0 lost: every answer acknowledged is counted, but those excluded.
	var plan api.TaskPlan
	if err := tn.retry(ctx, func(tk *client.Tasks) (err error) { plan, err = tk.Plan(ctx); return err }); err != nil {
		t.Fatal(err)
	}
	// An answer whose acknowledgement was lost (a node killed) was
	// applied: its retry is told of repeats. Of the answers acknowledged,
	// those to excluded prompts may be counted (answered before the
	// exclusion) or not (excluded while leased); every other counts.
	acked, maybe := 0, 0
	for _, l := range ev.answered {
		acked += len(l.Prompts)
		for _, p := range l.Prompts {
			if p.Dataset == "chat" && gone[p.Key] {
				maybe++
			}
		}
	}
	if plan.Counted > acked || plan.Counted < acked-maybe {
		t.Fatalf("%d answers counted by the plan; %d acknowledged, %d of them of prompts excluded", plan.Counted, acked, maybe)
	}
	// The replay: equal on every node, one digest, and on a node started
	// afresh.
	fresh := serveProc(t, cs.bin, env, srv.URL(), datasets...)
	digest := ""
	for _, u := range append(slices.Clone(cs.urls), fresh.url) {
		end := tdReplayEnd(t, u)
		if !end.Equal && u != fresh.url || digest != "" && end.Digest != digest {
			t.Fatalf("%s's replay: %+v; the first node's digest %s", u, end, digest)
		}
		digest = end.Digest
	}
	t.Logf("%d steps, %d leases, %d answers acknowledged (%d told excluded), %d appended prompts served, ratios edited from step %d", len(ev.steps), len(ev.leases), acked, ev.excluded, servedNew, ratioFrom)
}

// tdReplayEnd is the last line of a node's replay of the job.
func tdReplayEnd(t *testing.T, base string) api.TaskReplayEnd {
	t.Helper()
	_, body := httpGet(t, base+"/tasks/rl/replay?dataset=math")
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	var end api.TaskReplayEnd
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &end); err != nil || end.Digest == "" {
		t.Fatalf("%s's replay ends %s", base, lines[len(lines)-1])
	}
	return end
}

// tdGenerator leases and answers until ctx ends, every answer naming its
// prompt's dataset (the domains' keys coincide); a lease whose answer
// was lost is taken up from its open leases.
func tdGenerator(t *testing.T, ctx context.Context, tn *taskNodes, gen string, ev *tdEvents) {
	done := map[string]bool{}
	serve := func(l api.TaskLease, asked time.Time) {
		done[l.Lease] = true
		ev.mu.Lock()
		ev.leases = append(ev.leases, tdLeaseEvent{asked: asked, prompts: l.Prompts})
		ev.mu.Unlock()
		rs := make([]api.TaskResult, len(l.Prompts))
		for i, p := range l.Prompts {
			passes := 1 + p.ID%3
			rs[i] = api.TaskResult{Key: p.Key, Dataset: p.Dataset, Passes: &passes, N: 4, Version: uint32(l.Step)}
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		var a api.TaskAnswered
		err := tn.retry(actx, func(tk *client.Tasks) (err error) { a, err = tk.Answer(actx, l.Lease, rs); return err })
		var ae *client.APIError
		switch {
		case errors.As(err, &ae) && ae.StatusCode == http.StatusConflict:
			return // expired on its way: its prompts went back to the front
		case err != nil:
			t.Errorf("%s: answering %s: %v", gen, l.Lease, err)
			return
		}
		if a.Applied+a.Repeats != len(rs) {
			t.Errorf("%s: %s's %d answers: %+v", gen, l.Lease, len(rs), a)
		}
		ev.mu.Lock()
		ev.answered = append(ev.answered, l)
		ev.excluded += a.Excluded
		ev.mu.Unlock()
	}
	takeUp := func() {
		var open []api.TaskLease
		if err := tn.retry(ctx, func(tk *client.Tasks) (err error) { open, err = tk.OpenLeases(ctx, gen); return err }); err != nil {
			return
		}
		for _, l := range open {
			if !done[l.Lease] {
				serve(l, time.Time{})
			}
		}
	}
	for ctx.Err() == nil {
		asked := time.Now()
		l, err := tn.pick().Lease(ctx, gen, tdLease)
		var ae *client.APIError
		switch {
		case err == nil:
			serve(l, asked)
		case errors.As(err, &ae) && ae.StatusCode == http.StatusServiceUnavailable:
			time.Sleep(5 * time.Millisecond)
		case errors.As(err, &ae):
			t.Errorf("%s: leasing: %v", gen, err)
			return
		case ctx.Err() == nil:
			time.Sleep(20 * time.Millisecond) // a node lost: was the lease made?
			takeUp()
		}
	}
}
