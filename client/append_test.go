package client_test

import (
	"bytes"
	"context"
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

// A job read through the client across an append to its dataset (brand
// index --append, then POST /jobs/run/append from step 4): the client
// keeps the index version it pinned — every answer names it — and its
// epochs, counted from /epoch/N, hold every old and new sample once.
func TestAppendedJobThroughClient(t *testing.T) {
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
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
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

	put(map[string][]string{"c.lines": lines("c", 12)})
	res, err := dataset.AppendInPlace(ctx, st, st, dataset.AppendOptions{Formats: fs, Options: opt})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"from_step": 4, "index": %q}`, res.Index.ID())
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
