package client_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

// startBigGateway serves "big", 2003 samples in 24 chunks of uneven sizes:
// enough for several global batches of 64 × 8, and not a multiple of any
// global batch the tests use, so every cut ends in a partial batch.
func startBigGateway(t testing.TB) *fakeGateway {
	sizes := make([]int, 24)
	total := 0
	for i := range sizes {
		sizes[i] = 60 + i*37%41
		total += sizes[i]
	}
	sizes[len(sizes)-1] += 2003 - total
	g := startFakeGatewayWith(newFakeDataset("big", sizes, toySample))
	t.Cleanup(g.Close)
	if n := len(g.datasets["big"].samples); n != 2003 {
		t.Fatalf("big has %d samples; want 2003", n)
	}
	return g
}

// bigJob is the job of the resume tests over "big".
func bigJob(batchSize, world, rank int, dropLast bool) client.Options {
	return client.Options{Job: api.Job{Dataset: "big", Params: shuffle.Params{Seed: 11, Window: 4,
		BatchSize: batchSize, World: world, Rank: rank, DropLast: dropLast}}}
}

// readRest reads epoch from offset on every rank of a world, checks each
// batch's numbering and offset, and returns how often each key was served.
func readRest(t *testing.T, g *fakeGateway, epoch, offset, batchSize, world int, dropLast bool) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for rank := range world {
		c, _ := newClient(t, g, bigJob(batchSize, world, rank, dropLast))
		next := 0
		for b, err := range c.EpochFrom(context.Background(), epoch, offset) {
			if err != nil {
				t.Fatalf("world %d rank %d: %v", world, rank, err)
			}
			if b.Index != next || b.Offset != offset || b.EpochSamples != 2003 {
				t.Fatalf("world %d rank %d: batch %d offset %d of %d samples; want batch %d offset %d of 2003",
					world, rank, b.Index, b.Offset, b.EpochSamples, next, offset)
			}
			next++
			for _, s := range b.Samples {
				seen[s.Key]++
			}
			b.Release()
		}
	}
	return seen
}

// TestEpochFromResume: a job of 4 ranks with batches of 64 consumes 5
// batches of an epoch and stops; resumed from ResumeOffset at another world
// size (and batch size), its ranks read every remaining sample of the epoch
// exactly once.
func TestEpochFromResume(t *testing.T) {
	const epoch, consumed = 3, 5
	tests := []struct {
		name             string
		world, batchSize int
	}{
		{"world 3", 3, 64},
		{"world 8", 8, 64},
		{"world 1", 1, 64},
		{"world 8, batch size 16", 8, 16},
	}
	g := startBigGateway(t)
	before := map[string]int{}
	var offset int
	for rank := range 4 {
		c, _ := newClient(t, g, bigJob(64, 4, rank, false))
		if rank == 0 {
			plan, err := c.EpochInfo(context.Background(), epoch)
			if err != nil {
				t.Fatal(err)
			}
			offset = client.ResumeOffset(plan, consumed)
		}
		n := 0
		for b, err := range c.Epoch(context.Background(), epoch) {
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Samples {
				before[s.Key]++
			}
			if n++; n == consumed {
				break
			}
		}
	}
	if offset != consumed*64*4 || len(before) != offset {
		t.Fatalf("offset %d after %d distinct samples; want %d for both", offset, len(before), consumed*64*4)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := readRest(t, g, epoch, offset, tt.batchSize, tt.world, false)
			if len(after) != 2003-offset {
				t.Errorf("resumed ranks read %d distinct samples; want the %d remaining", len(after), 2003-offset)
			}
			for k, n := range after {
				if n != 1 || before[k] != 0 {
					t.Errorf("sample %s read %d times after the resume and %d before", k, n, before[k])
				}
			}
		})
	}
}

// TestEpochFromDropLast: with drop_last, the rest of an epoch loses only
// its own partial final global batch, and what is read is exactly the
// epoch's positions from the offset up to there.
func TestEpochFromDropLast(t *testing.T) {
	g := startBigGateway(t)
	tests := []struct {
		name                     string
		offset, batchSize, world int
		batches                  int
	}{
		{"three full batches of 3×64 after 1280", 1280, 64, 3, 3},       // 723 left: 3×192 read, 147 dropped
		{"no full batch left", 1900, 64, 3, 0},                          // 103 left < 192
		{"offset not a multiple of the batch", 1001, 10, 7, 14},         // 1002 left: 14×70 read
		{"the whole epoch at world 1", 0, 64, 1, 2003 / 64},             // 31×64 read
		{"offset at the end of the epoch", 2003, 64, 3, 0},              // nothing left
		{"one sample left, world 1, batch 1", 2002, 1, 1, 1},            // the last one
		{"batch size 1 after an odd offset", 1999, 1, 3, 1},             // 4 left: one batch of 3
		{"the remainder is exactly two global batches", 1619, 64, 3, 2}, // 384 left
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newClient(t, g, bigJob(tt.batchSize, tt.world, 0, true))
			plan, err := c.EpochInfoFrom(context.Background(), 1, tt.offset)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Batches != tt.batches || plan.Offset != tt.offset || plan.RankSamples != tt.batches*tt.batchSize {
				t.Errorf("plan: %d batches from %d, %d for rank 0; want %d from %d, %d",
					plan.Batches, plan.Offset, plan.RankSamples, tt.batches, tt.offset, tt.batches*tt.batchSize)
			}
			seen := readRest(t, g, 1, tt.offset, tt.batchSize, tt.world, true)
			d := g.datasets["big"]
			order := d.order(fakeParams{seed: 11, window: 4}, 1)
			end := tt.offset + tt.batches*tt.batchSize*tt.world
			if len(seen) != end-tt.offset {
				t.Errorf("read %d distinct samples; want the %d of positions [%d, %d)", len(seen), end-tt.offset, tt.offset, end)
			}
			for _, id := range order[tt.offset:end] {
				if k := d.samples[id].key; seen[k] != 1 {
					t.Errorf("sample %s read %d times; want once", k, seen[k])
				}
			}
		})
	}
}

// TestEpochFromErrors: offsets the client or gateway cannot serve, and
// gateways that ignore the offset, fail with an error that says so rather
// than with samples the job has already trained on.
func TestEpochFromErrors(t *testing.T) {
	// dropOffset answers a request as if it had no offset parameter.
	dropOffset := func(g *fakeGateway, batches bool) func(http.ResponseWriter, *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if (batchNumber(r) >= 0) != batches {
				return false
			}
			r2 := r.Clone(r.Context())
			q := r2.URL.Query()
			q.Del(api.ParamOffset)
			r2.URL.RawQuery = q.Encode()
			g.mux.ServeHTTP(w, r2)
			return true
		}
	}
	tests := []struct {
		name     string
		offset   int
		hook     func(g *fakeGateway) func(http.ResponseWriter, *http.Request) bool
		sentinel error
		status   int
		message  string
	}{
		{"past the epoch", 2004, nil, nil, 404, "offset 2004 past the end of the epoch"},
		{"far past the epoch", math.MaxInt, nil, nil, 404, "past the end of the epoch"},
		{"negative", -1, nil, client.ErrInvalid, 0, "offset -1; must be >= 0"},
		{"plan ignores the offset", 512, func(g *fakeGateway) func(http.ResponseWriter, *http.Request) bool { return dropOffset(g, false) },
			client.ErrBadResponse, 0, "asked for offset=512, gateway planned offset=0"},
		{"batches ignore the offset", 512, func(g *fakeGateway) func(http.ResponseWriter, *http.Request) bool { return dropOffset(g, true) },
			client.ErrBadResponse, 0, "asked for offset 512, Brand-Offset says 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := startBigGateway(t)
			if tt.hook != nil {
				g.setHook(tt.hook(g))
			}
			c, _ := newClient(t, g, bigJob(64, 3, 1, false))
			var errs []error
			n := 0
			for b, err := range c.EpochFrom(context.Background(), 2, tt.offset) {
				if err != nil {
					errs = append(errs, err)
					continue
				}
				n++
				b.Release()
			}
			if n != 0 || len(errs) != 1 {
				t.Fatalf("%d batches, errors %v; want one error and no batch", n, errs)
			}
			err := errs[0]
			var apiErr *client.APIError
			switch {
			case tt.sentinel != nil && !errors.Is(err, tt.sentinel):
				t.Errorf("error %v; want %v", err, tt.sentinel)
			case tt.status != 0 && (!errors.As(err, &apiErr) || apiErr.StatusCode != tt.status):
				t.Errorf("error %v; want a %d APIError", err, tt.status)
			case !strings.Contains(err.Error(), tt.message):
				t.Errorf("error %q does not say %q", err, tt.message)
			}
			if tt.sentinel == client.ErrInvalid && len(g.requests()) != 0 {
				t.Errorf("requests %q for an invalid offset", g.requests())
			}
		})
	}
}

func TestResumeOffset(t *testing.T) {
	start := &client.EpochInfo{Samples: 2003, BatchSize: 64, World: 4}
	rest := &client.EpochInfo{Samples: 2003, BatchSize: 64, World: 3, Offset: 1280}
	tests := []struct {
		name     string
		plan     *client.EpochInfo
		consumed int
		want     int
	}{
		{"nothing consumed", start, 0, 0},
		{"negative counts as nothing", start, -3, 0},
		{"five batches of 4×64", start, 5, 1280},
		{"all but the partial last", start, 7, 1792},
		{"the partial last batch caps at the epoch", start, 8, 2003},
		{"more batches than the epoch has", start, 100, 2003},
		{"no overflow", start, math.MaxInt, 2003},
		{"from an offset, nothing consumed", rest, 0, 1280},
		{"from an offset, two batches of 3×64", rest, 2, 1664},
		{"from an offset, to the end", rest, 4, 2003},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := client.ResumeOffset(tt.plan, tt.consumed); got != tt.want {
				t.Errorf("ResumeOffset(%d) = %d; want %d", tt.consumed, got, tt.want)
			}
		})
	}
}

// linesJob is rank of a world of job "run" over appendingGateway's
// "lines", in batches of 3, reading index version index ("": the one the
// first answer names).
func linesJob(world, rank int, index string) client.Options {
	return client.Options{Job: api.Job{Name: "run", Dataset: "lines", Index: index,
		Params: shuffle.Params{Seed: 5, BatchSize: 3, Window: 2, World: world, Rank: rank}}}
}

// lockstep reads epoch 0 of linesJob on every rank of world in step, as
// the ranks of a training job do: step s reads batch s on each rank,
// rank 0 first, each rank's Epoch loop keeping its batches requested
// ahead. after is called once every rank has consumed the batches of
// steps 0..s-1, with s, rank 0's client and last batch (its Plan current
// as the loop keeps it) and how often each key was read, before any rank
// reads step s. lockstep checks that the loops read each key once, and
// returns how often each key was read and the epoch's steps.
func lockstep(t *testing.T, url string, world int, after func(s int, c *client.Client, last *client.Batch, read map[string]int)) (map[string]int, int) {
	t.Helper()
	ctx := context.Background()
	var c0 *client.Client
	nexts := make([]func() (*client.Batch, error, bool), world)
	for rank := range world {
		c := newMixClient(t, url, linesJob(world, rank, ""))
		if rank == 0 {
			c0 = c
		}
		next, stop := iter.Pull2(c.Epoch(ctx, 0))
		defer stop()
		nexts[rank] = next
	}
	seen := map[string]int{}
	var last *client.Batch
	for s := 0; ; s++ {
		if s > 0 {
			after(s, c0, last, seen)
		}
		ended := 0
		for rank, next := range nexts {
			b, err, ok := next()
			switch {
			case !ok:
				ended++
				continue
			case err != nil:
				t.Fatalf("step %d rank %d: %v", s, rank, err)
			case b.Index != s:
				t.Fatalf("step %d rank %d: batch %d", s, rank, b.Index)
			}
			for _, smp := range b.Samples {
				seen[smp.Key]++
			}
			b.Release()
			if rank == 0 {
				last = b
			}
		}
		switch ended {
		case world:
			for k, n := range seen {
				if n != 1 {
					t.Fatalf("the loops read %s %d times", k, n)
				}
			}
			return seen, s
		case 0:
		default:
			t.Fatalf("step %d: %d of %d ranks' epochs ended", s, ended, world)
		}
	}
}

// readLinesRest reads epoch 0 of linesJob from offset on every rank of
// world, each batch of an epoch of samples, and returns how often each
// key was read.
func readLinesRest(t *testing.T, url, index string, offset, world, samples int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for rank := range world {
		c := newMixClient(t, url, linesJob(world, rank, index))
		next := 0
		for b, err := range c.EpochFrom(context.Background(), 0, offset) {
			if err != nil {
				t.Fatalf("world %d rank %d from offset %d: %v", world, rank, offset, err)
			}
			if b.Index != next || b.Offset != offset || b.EpochSamples != samples {
				t.Fatalf("world %d rank %d: batch %d offset %d of %d samples; want batch %d offset %d of %d",
					world, rank, b.Index, b.Offset, b.EpochSamples, next, offset, samples)
			}
			next++
			for _, s := range b.Samples {
				seen[s.Key]++
			}
			b.Release()
		}
	}
	return seen
}

// checkpoint is what a job saves after a step: the offset to resume the
// epoch from, the batches each rank consumed, and (for the test) how
// often each key had been read.
type checkpoint struct {
	consumed, offset int
	read             map[string]int
}

// resumeExactly resumes each checkpoint at world 2 and 3 from its offset,
// on the index version the job pinned, and checks that what was read
// before it and after it is every sample of an epoch of samples once
// (none of them in excluded), the offset the one a plan asked for again
// gives.
func resumeExactly(t *testing.T, url, index string, cps []checkpoint, samples int, excluded []string) {
	t.Helper()
	c := newMixClient(t, url, linesJob(2, 0, index))
	plan, err := c.EpochInfo(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Samples != samples {
		t.Fatalf("epoch 0 has %d samples; want %d", plan.Samples, samples)
	}
	for _, cp := range cps {
		if got := client.ResumeOffset(plan, cp.consumed); got != cp.offset {
			t.Errorf("after %d steps: ResumeOffset of the plan asked for again is %d, the checkpoint's %d", cp.consumed, got, cp.offset)
		}
		for _, world := range []int{2, 3} {
			t.Run(fmt.Sprintf("after %d steps at world %d", cp.consumed, world), func(t *testing.T) {
				after := readLinesRest(t, url, index, cp.offset, world, samples)
				for k, n := range after {
					if n != 1 || cp.read[k] != 0 {
						t.Errorf("sample %s read %d times after the resume from %d and %d before", k, n, cp.offset, cp.read[k])
					}
				}
				if len(cp.read)+len(after) != samples {
					t.Errorf("%d samples read before the resume from %d and %d after; want the epoch's %d", len(cp.read), cp.offset, len(after), samples)
				}
				for _, k := range excluded {
					if cp.read[k]+after[k] != 0 {
						t.Errorf("excluded sample %s read", k)
					}
				}
			})
		}
	}
}

// TestResumeAcrossAnAppend: a job of 2 ranks in batches of 3 (60 samples
// an epoch, 10 steps) appends 12 samples from step 5, and its loops go on
// to the grown epoch's end (72 samples, 12 steps). Its checkpoints after
// step 8 (48 samples), 11 (66, past the old end) and 12 (the whole epoch)
// resume at world 2 and 3 with every remaining sample of the grown epoch
// once. With the plan taken when the epoch began (60 samples),
// ResumeOffset capped the last two at 60, and the resume read 6 and 12
// samples again.
func TestResumeAcrossAnAppend(t *testing.T) {
	srv, appendFiles := appendingGateway(t)
	var index string
	var cps []checkpoint
	seen, steps := lockstep(t, srv.URL, 2, func(s int, c *client.Client, last *client.Batch, read map[string]int) {
		if s == 3 {
			// Each rank has asked for up to step 2+DefaultAhead: step
			// 3+DefaultAhead is the first the record can be from.
			index = c.Index()
			if _, err := c.Append(context.Background(), uint64(s+client.DefaultAhead), appendFiles().Index.ID(), ""); err != nil {
				t.Fatal(err)
			}
		}
		if s == 8 || s == 11 || s == 12 {
			if last.Plan.Samples != 72 {
				t.Fatalf("after step %d: the last batch's plan has %d samples; want the grown epoch's 72", s, last.Plan.Samples)
			}
			cps = append(cps, checkpoint{s, client.ResumeOffset(last.Plan, last.Index+1), maps.Clone(read)})
		}
	})
	if steps != 12 || len(seen) != 72 {
		t.Fatalf("the loops read %d steps, %d samples; want the grown epoch's 12 steps, 72 samples", steps, len(seen))
	}
	want := []int{48, 66, 72}
	for i, cp := range cps {
		if cp.offset != want[i] {
			t.Errorf("after step %d: offset %d; want %d", cp.consumed, cp.offset, want[i])
		}
	}
	resumeExactly(t, srv.URL, index, cps, 72, nil)
}

// TestResumeAcrossAnExclusion: a job of 2 ranks in batches of 3 (60
// samples an epoch, 10 steps) excludes 8 samples from step 5 on, and its
// loops end the shrunk epoch (52 samples) after 9 steps. Its checkpoints
// after step 7 (42 samples) and after the pass (52) resume at world 2
// and 3 with every remaining sample of the shrunk epoch once, none
// excluded. With the plan taken when the epoch began, the offset after
// the pass was 54, past the shrunk epoch's end, and the resume failed
// with 404.
func TestResumeAcrossAnExclusion(t *testing.T) {
	srv, _ := appendingGateway(t)
	// The epoch's order before the list: a job without a name reads the
	// same one.
	var order []string
	plain := newMixClient(t, srv.URL, client.Options{Job: api.Job{Dataset: "lines", Params: shuffle.Params{Seed: 5, BatchSize: 3, Window: 2, World: 1}}})
	for b, err := range plain.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range b.Samples {
			order = append(order, s.Key)
		}
		b.Release()
	}
	if len(order) != 60 {
		t.Fatalf("epoch 0 has %d samples; want 60", len(order))
	}
	from := 3 + client.DefaultAhead // the first step no rank has asked for at step 3
	var excluded []string
	for _, p := range []int{31, 33, 36, 40, 44, 47, 52, 59} { // positions after from's 30
		excluded = append(excluded, order[p])
	}
	var index string
	var cps []checkpoint
	seen, steps := lockstep(t, srv.URL, 2, func(s int, c *client.Client, last *client.Batch, read map[string]int) {
		if s == 3 {
			index = c.Index()
			if _, err := c.Exclude(context.Background(), uint64(from), excluded); err != nil {
				t.Fatal(err)
			}
		}
		if s == 7 || s == 9 {
			if last.Plan.Samples != 52 {
				t.Fatalf("after step %d: the last batch's plan has %d samples; want the shrunk epoch's 52", s, last.Plan.Samples)
			}
			cps = append(cps, checkpoint{s, client.ResumeOffset(last.Plan, last.Index+1), maps.Clone(read)})
		}
	})
	if steps != 9 || len(seen) != 52 {
		t.Fatalf("the loops read %d steps, %d samples; want the shrunk epoch's 9 steps, 52 samples", steps, len(seen))
	}
	want := []int{42, 52}
	for i, cp := range cps {
		if cp.offset != want[i] {
			t.Errorf("after step %d: offset %d; want %d", cp.consumed, cp.offset, want[i])
		}
	}
	resumeExactly(t, srv.URL, index, cps, 52, excluded)
}
