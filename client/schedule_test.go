package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

// readWith reads epoch from offset on every rank of world with the
// options opts gives each rank, at most stop batches each (-1: all), and
// returns the samples in epoch order and each rank's client.
func (m *mixGateway) readWith(t *testing.T, opts func(rank int) client.Options, world, epoch, offset, stop int) ([]mixKey, []*client.Client) {
	t.Helper()
	ranks := make([][][]mixKey, world)
	clients := make([]*client.Client, world)
	for rank := range world {
		c := newMixClient(t, m.URL, opts(rank))
		clients[rank] = c
		for b, err := range c.EpochFrom(context.Background(), epoch, offset) {
			if err != nil {
				t.Fatalf("world %d rank %d: %v", world, rank, err)
			}
			for _, s := range b.Samples {
				m.checkSample(t, s)
			}
			ranks[rank] = append(ranks[rank], mixKeys(b.Samples))
			b.Release()
			if len(ranks[rank]) == stop {
				break
			}
		}
	}
	var out []mixKey
	for b := range ranks[0] {
		for rank := range world {
			if b < len(ranks[rank]) {
				out = append(out, ranks[rank][b]...)
			}
		}
	}
	return out, clients
}

func schedOpts(s api.Schedule, world, block int) func(int) client.Options {
	return func(rank int) client.Options {
		return client.Options{Job: api.Job{Schedule: s, MixBlock: block, Params: shuffle.Params{Seed: 5, BatchSize: 8, World: world, Rank: rank}}}
	}
}

func storedOpts(version string, world, block int) func(int) client.Options {
	return func(rank int) client.Options {
		return client.Options{Job: api.Job{Name: "run", ScheduleVersion: version, MixBlock: block,
			Params: shuffle.Params{Seed: 5, BatchSize: 8, World: world, Rank: rank}}}
	}
}

func putSchedule(t *testing.T, url, method, sched string, from uint64, base string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"schedule": sched, "from_step": from, "base": base})
	req, _ := http.NewRequest(method, url+"/jobs/run/schedule", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Version string `json:"version"`
	}
	if resp.StatusCode >= 300 || json.NewDecoder(resp.Body).Decode(&v) != nil {
		t.Fatalf("%s schedule: %d", method, resp.StatusCode)
	}
	return v.Version
}

// TestScheduleClient: the client reads a schedule given with the job
// (Options.Job.Schedule) and one stored under the job's name
// (Options.Job.ScheduleVersion): the first steps are the first phase's
// mixture; after an edit mid-epoch, a client resumed at another world
// size with the version pinned before the edit re-pins to the current
// one at the edit's step and reads what a job given the final schedule
// from the start reads.
func TestScheduleClient(t *testing.T) {
	g := startMixGateway(t)
	const world = 4 // K = 32, 14 steps an epoch
	inline, err := api.ParseSchedule("0:" + testMix.String() + ";5:web:0.2,code:0.6,books:0.2")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := g.readWith(t, schedOpts(inline, world, 0), world, 0, 0, -1)
	plain := g.readMixEpoch(t, world, 0, 0, 0, -1)
	if len(got) != len(plain) || fmt.Sprint(got[:5*32]) != fmt.Sprint(plain[:5*32]) || fmt.Sprint(got) == fmt.Sprint(plain) {
		t.Fatalf("the schedule's epoch: %d samples; want the mixture's %d, its first 5 steps alike and the rest not", len(got), len(plain))
	}

	v1 := putSchedule(t, g.URL, http.MethodPut, "0:"+testMix.String(), 0, "")
	head, clients := g.readWith(t, storedOpts("latest", world, 0), world, 0, 0, 6)
	if v := clients[0].ScheduleVersion(); v != v1 {
		t.Fatalf("pinned %q, want %s", v, v1)
	}
	second := "10:web:0.2,code:0.6,books:0.2;20~30:web:0.6,code:0.2,books:0.2"
	v2 := putSchedule(t, g.URL, http.MethodPost, second, 10, v1) // after the batches read ahead
	// Resume at world 2 with the checkpoint's version (v1) and block.
	rest, clients := g.readWith(t, storedOpts(v1, 2, 32), 2, 0, 6*32, -1)
	if v := clients[0].ScheduleVersion(); v != v2 {
		t.Fatalf("after the edit the client reads %q, want %s", v, v2)
	}
	final, err := api.ParseSchedule("0:" + testMix.String() + ";" + second)
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := g.readWith(t, schedOpts(final, world, 0), world, 0, 0, -1)
	if edited := append(head, rest...); fmt.Sprint(edited) != fmt.Sprint(whole) {
		t.Fatalf("the edited, resumed epoch (%d samples) differs from the final schedule's (%d)", len(edited), len(whole))
	}
	// The next epoch asks with v2 pinned and reads the final schedule's.
	next, _ := g.readWith(t, storedOpts(v2, world, 0), world, 1, 0, -1)
	want, _ := g.readWith(t, schedOpts(final, world, 0), world, 1, 0, -1)
	if fmt.Sprint(next) != fmt.Sprint(want) {
		t.Fatal("epoch 1 under the stored schedule differs from the final schedule's")
	}
}
