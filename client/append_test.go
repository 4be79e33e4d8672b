package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// appendingGateway is an in-process gateway serving "lines", a dataset
// served in place of two files of 30 lines (format Lines, chunks of 100
// bytes), and appendFiles, which appends a third of 12 lines (brand index
// --append), has the gateway load it, and returns what it made.
func appendingGateway(t *testing.T) (srv *httptest.Server, appendFiles func() *dataset.Result) {
	t.Helper()
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	put := func(files map[string][]string) {
		for k, b := range formattest.Write(files) {
			if _, err := st.Put(ctx, k, bytes.NewReader(b), int64(len(b))); err != nil {
				t.Fatal(err)
			}
		}
	}
	lines := func(name string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s line %d", name, i))
		}
		return out
	}
	put(map[string][]string{"a.lines": lines("a", 30), "b.lines": lines("b", 30)})
	fs := []format.Format{formattest.Lines{}}
	opt := format.Options{ChunkBytes: 100}
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: fs, Options: opt}); err != nil {
		t.Fatal(err)
	}
	g := loadedGateway(t, gateway.Config{Datasets: []gateway.DatasetSpec{{Name: "lines", URL: "file:///lines", Store: st, Formats: fs}},
		CacheSize: 64 << 20, NoPrefault: true, IndexPoll: -1, Defaults: gateway.Defaults{BatchSize: 8, Window: 2, Seed: 5}})
	srv = httptest.NewServer(g)
	t.Cleanup(srv.Close)
	added := 0
	return srv, func() *dataset.Result {
		t.Helper()
		name := string(rune('c' + added)) // c.lines, then d.lines, …
		added++
		put(map[string][]string{name + ".lines": lines(name, 12)})
		res, err := dataset.AppendInPlace(ctx, st, st, dataset.AppendOptions{Formats: fs, Options: opt})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// A job read through the client across an append to its dataset (brand
// index --append, then POST /jobs/run/append from step 5): the client
// keeps the index version it pinned — every answer names it — and its
// epochs, counted from /epoch/N, hold every old and new sample once.
func TestAppendedJobThroughClient(t *testing.T) {
	ctx := context.Background()
	srv, appendFiles := appendingGateway(t)
	c := newMixClient(t, srv.URL, client.Options{Job: api.Job{Name: "run", Dataset: "lines", Params: shuffle.Params{Seed: 5, BatchSize: 6, Window: 2, World: 1}}})
	seen := map[string]int{}
	read := 0
	for b, err := range c.Epoch(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range b.Samples {
			seen[s.Key]++
		}
		b.Release()
		if read++; read == 3 {
			break
		}
	}
	v := c.Index()

	res := appendFiles()
	// The client keeps DefaultAhead batches requested beyond the one read:
	// steps 3 and 4 may have been served when the loop stops, and the
	// gateway refuses a record from a step served (409: "served job run up
	// to position 30"; from step 4, 1 of 120 runs failed so, four at once
	// under the race detector). Step 5 is the first no request can have
	// reached.
	body := fmt.Sprintf(`{"from_step": %d, "index": %q}`, read+client.DefaultAhead, res.Index.ID())
	resp, err := http.Post(srv.URL+"/jobs/run/append?dataset=lines&batch_size=6&seed=5&window=2&index="+v, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST append: %s", resp.Status)
	}
	// The rest of epoch 0 from where the job stopped, then epoch 1.
	for b, err := range c.EpochFrom(ctx, 0, read*6) {
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range b.Samples {
			seen[s.Key]++
		}
		b.Release()
	}
	check := func(what string) {
		t.Helper()
		if len(seen) != 72 || c.Index() != v {
			t.Fatalf("%s: %d samples, want 72; the client's index %s, pinned %s", what, len(seen), c.Index(), v)
		}
		for k, n := range seen {
			if n != 1 {
				t.Fatalf("%s: %s read %d times", what, k, n)
			}
		}
	}
	check("epoch 0")
	seen = map[string]int{}
	for b, err := range c.Epoch(ctx, 1) {
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range b.Samples {
			seen[s.Key]++
		}
		b.Release()
	}
	check("epoch 1")
}

// TestClientAppend: Client.Append records that the job takes the samples
// of an appended version from a step; Client.AppendRecord reads it back;
// a record from a step read is refused with the first step a record
// could start at, a version that does not extend the job's with 422, and
// a second record with 409; the epoch read through the client holds
// every old and new sample once.
func TestClientAppend(t *testing.T) {
	ctx := context.Background()
	srv, appendFiles := appendingGateway(t)
	c := newMixClient(t, srv.URL, client.Options{Job: api.Job{Name: "run", Dataset: "lines", Params: shuffle.Params{Seed: 5, BatchSize: 6, Window: 2, World: 1}}})
	seen := map[string]int{}
	// read reads epoch 0 from position from, batches of it (all: -1).
	read := func(from, batches int) {
		t.Helper()
		for b, err := range c.EpochFrom(ctx, 0, from) {
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Samples {
				seen[s.Key]++
			}
			b.Release()
			if batches--; batches == 0 {
				return
			}
		}
	}
	read(0, 3) // steps 0-2
	pinned := c.Index()
	if _, err := c.AppendRecord(ctx); statusOf(err) != http.StatusNotFound {
		t.Fatalf("AppendRecord before a record: %v; want 404", err)
	}
	res := appendFiles()
	_, err := c.Append(ctx, 1, res.Index.ID(), "")
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || ae.FirstEditableStep == nil || *ae.FirstEditableStep < 3 {
		t.Fatalf("a record from a step read: %v; want 409 naming step 3 or later (the client reads ahead)", err)
	}
	step := *ae.FirstEditableStep
	if _, err := c.Append(ctx, step, pinned, ""); statusOf(err) != http.StatusUnprocessableEntity {
		t.Fatalf("a record of the job's own version: %v; want 422", err)
	}
	rec, err := c.Append(ctx, step, res.Index.ID(), "")
	if err != nil || rec.Version == "" || rec.IndexID != pinned || rec.Index != res.Index.ID() || rec.NewSamples != 12 || rec.Samples != 72 || rec.FromPosition != int(step)*6 {
		t.Fatalf("Append: %+v, %v", rec, err)
	}
	if back, err := c.AppendRecord(ctx); err != nil || back != rec {
		t.Fatalf("AppendRecord: %+v, %v; want %+v", back, err, rec)
	}
	if again, err := c.Append(ctx, step, res.Index.ID(), ""); err != nil || again.Version != rec.Version {
		t.Fatalf("the same record again: %+v, %v", again, err)
	}
	if _, err := c.Append(ctx, step+1, res.Index.ID(), ""); statusOf(err) != http.StatusConflict {
		t.Fatalf("a second record: %v; want 409", err)
	}
	read(18, -1)
	if len(seen) != 72 || c.Index() != pinned {
		t.Fatalf("epoch 0: %d samples, want 72; the client reads %s, pinned %s", len(seen), c.Index(), pinned)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s read %d times", k, n)
		}
	}
}

// statusOf is the HTTP status of err, a client call's: 0 if it is not
// the gateway's answer.
func statusOf(err error) int {
	if ae, ok := errors.AsType[*client.APIError](err); ok {
		return ae.StatusCode
	}
	return 0
}

// TestClientAppendChain: Client.Append naming a previous record takes a second append after
// the job's first (a writer adding files every hour); AppendRecord
// returns the current record, which names the one before; a record
// without previous is refused with 409; epoch 0 read through the client
// holds every old and new sample once.
func TestClientAppendChain(t *testing.T) {
	ctx := context.Background()
	srv, appendFiles := appendingGateway(t)
	c := newMixClient(t, srv.URL, client.Options{Job: api.Job{Name: "run", Dataset: "lines", Params: shuffle.Params{Seed: 5, BatchSize: 6, Window: 2, World: 1}}})
	seen := map[string]int{}
	readFrom := func(from, batches int) {
		t.Helper()
		for b, err := range c.EpochFrom(ctx, 0, from) {
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Samples {
				seen[s.Key]++
			}
			b.Release()
			if batches--; batches == 0 {
				return
			}
		}
	}
	readFrom(0, 2) // steps 0-1; the client may have asked up to step 1+DefaultAhead
	first := uint64(2 + client.DefaultAhead)
	r1, err := c.Append(ctx, first, appendFiles().Index.ID(), "")
	if err != nil {
		t.Fatal(err)
	}
	x2 := appendFiles().Index.ID()
	if _, err := c.Append(ctx, first+2, x2, ""); statusOf(err) != http.StatusConflict {
		t.Fatalf("a second record without previous: %v; want 409", err)
	}
	r2, err := c.Append(ctx, first+2, x2, r1.Version)
	if err != nil || r2.Previous != r1.Version || r2.IndexID != r1.Index || r2.Index != x2 || r2.Samples != 84 || r2.FromPosition != int(first+2)*6 {
		t.Fatalf("Append after %s: %+v, %v", r1.Version, r2, err)
	}
	if back, err := c.AppendRecord(ctx); err != nil || back != r2 {
		t.Fatalf("AppendRecord: %+v, %v; want %+v", back, err, r2)
	}
	readFrom(12, -1)
	if len(seen) != 84 {
		t.Fatalf("epoch 0: %d samples, want 84", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("epoch 0: %s read %d times", k, n)
		}
	}
}

// A plain epoch loop across an append made while it runs: from the
// record's step the gateway's batches report the grown epoch (more
// batches and samples than the plan the loop started from), and the loop
// follows it — a new plan from the same offset, whose count the batches
// agree with — to the epoch's new end, every old and new sample once.
// The loop failed with ErrBadResponse ("the epoch plan has 10 batches but
// batch 5 reports 12") when the epoch grew under it.
func TestEpochLoopFollowsAnAppend(t *testing.T) {
	ctx := context.Background()
	srv, appendFiles := appendingGateway(t)
	c := newMixClient(t, srv.URL, client.Options{Job: api.Job{Name: "run", Dataset: "lines", Params: shuffle.Params{Seed: 5, BatchSize: 6, Window: 2, World: 1}}})
	seen := map[string]int{}
	read := 0
	for b, err := range c.Epoch(ctx, 0) {
		if err != nil {
			t.Fatalf("after %d batches: %v", read, err)
		}
		for _, s := range b.Samples {
			seen[s.Key]++
		}
		b.Release()
		if read++; read == 3 {
			res := appendFiles()
			body := fmt.Sprintf(`{"from_step": %d, "index": %q}`, read+client.DefaultAhead, res.Index.ID())
			resp, err := http.Post(srv.URL+"/jobs/run/append?dataset=lines&batch_size=6&seed=5&window=2&index="+c.Index(), "application/json", bytes.NewReader([]byte(body)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("POST append: %s", resp.Status)
			}
		}
	}
	if len(seen) != 72 || read != 12 {
		t.Fatalf("the loop read %d batches, %d samples; want the grown epoch's 12 batches, 72 samples", read, len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s read %d times", k, n)
		}
	}
}
