package client_test

import (
	"context"
	"errors"
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
