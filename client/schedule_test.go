package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// TestEditScheduleFromNext: a job reading its stored schedule with
// batches requested ahead is edited from the next step mid-epoch through
// Client.EditSchedule: the edit is not refused for the steps read ahead,
// takes effect from the first step no request had read (after the
// batches consumed, within the read-ahead), and the epoch read on through
// it is what a job given the final schedule from the start reads. An edit
// from a step consumed but read is refused with the first step an edit
// could start at, as a field.
func TestEditScheduleFromNext(t *testing.T) {
	g := startMixGateway(t)
	const world = 4 // K = 32: a global batch is a step, 14 steps an epoch
	ctx := context.Background()
	c := newMixClient(t, g.URL, storedOpts("latest", world, 0)(0))
	if _, err := c.Schedule(ctx); err == nil {
		t.Fatal("a job with no stored schedule has one")
	}
	v1, err := c.StoreSchedule(ctx, "0:"+testMix.String())
	if err != nil {
		t.Fatal(err)
	}
	var got [][]mixKey
	var edit api.StoredSchedule
	for b, err := range c.Epoch(ctx, 0) {
		if err != nil {
			t.Fatalf("batch %d: %v", len(got), err)
		}
		got = append(got, mixKeys(b.Samples))
		b.Release()
		if len(got) != 3 {
			continue
		}
		// Steps 0..2 consumed; the client has read ahead since.
		_, err := c.EditSchedule(ctx, "2:web:0,code:1,books:0", api.EditFrom{Step: 2})
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || apiErr.FirstEditableStep == nil || *apiErr.FirstEditableStep < 3 {
			t.Fatalf("an edit from step 2, read: %v; want a 409 naming the first step an edit could start at", err)
		}
		if edit, err = c.EditSchedule(ctx, "next:web:0,code:1,books:0", api.EditFrom{Next: true}); err != nil {
			t.Fatalf("an edit from the next step: %v", err)
		}
		// Holding batch 2, the client has requested up to 2+Ahead.
		if edit.Previous != v1.Version || edit.FromStep < *apiErr.FirstEditableStep || edit.FromStep > 2+client.DefaultAhead+1 {
			t.Fatalf("the edit from the next step took effect from step %d (based on %s); want from %d, within the read-ahead of %d batches after step 2",
				edit.FromStep, edit.Previous, *apiErr.FirstEditableStep, client.DefaultAhead)
		}
	}
	if c.ScheduleVersion() != edit.Version {
		t.Errorf("after the edit the client reads %q, want %s", c.ScheduleVersion(), edit.Version)
	}
	final, err := api.ParseSchedule(fmt.Sprintf("0:%s;%d:web:0,code:1,books:0", testMix, edit.FromStep))
	if err != nil {
		t.Fatal(err)
	}
	var want [][]mixKey
	for b, err := range newMixClient(t, g.URL, schedOpts(final, world, 0)(0)).Epoch(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, mixKeys(b.Samples))
		b.Release()
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the epoch read through the edit (%d batches) differs from the final schedule's (%d)", len(got), len(want))
	}
	for s, b := range got[edit.FromStep:] {
		for _, k := range b {
			if k.dataset != "code" {
				t.Fatalf("step %d, after the edit from %d, holds a sample of %s", int(edit.FromStep)+s, edit.FromStep, k.dataset)
			}
		}
	}
}
