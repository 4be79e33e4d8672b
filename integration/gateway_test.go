package integration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/shuffle"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/s3backend"
)

// packed is a synthetic dataset packed into a fresh bucket on a real MinIO.
type packed struct {
	spec   synth.Spec
	server *miniotest.Server
	url    string
	store  s3backend.Store
	bytes  int64 // sum of chunk sizes
	chunk  int64 // largest chunk
}

func packToMinIO(t *testing.T, spec synth.Spec, chunkSize int64) *packed {
	t.Helper()
	srv := miniotest.ForTest(t)
	if err := srv.MakeBucket(context.Background(), "train"); err != nil {
		t.Fatal(err)
	}
	return packInto(t, srv, "s3://train/synthetic", spec, chunkSize)
}

// packInto packs spec's dataset to url on srv, whose bucket exists.
func packInto(t *testing.T, srv *miniotest.Server, url string, spec synth.Spec, chunkSize int64) *packed {
	t.Helper()
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "src")
	if err := spec.WriteTree(src); err != nil {
		t.Fatal(err)
	}
	store, err := s3backend.Open(ctx, url, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: chunkSize, Shuffle: true, Seed: 11, Name: "synthetic"})
	if err != nil {
		t.Fatal(err)
	}
	p := &packed{spec: spec, server: srv, url: url, store: store, bytes: res.Index.TotalBytes()}
	for c := range res.Index.NumChunks() {
		p.chunk = max(p.chunk, res.Index.Chunk(c).Size)
	}
	if res.Index.NumChunks() < 8 {
		t.Fatalf("fixture too small: %d chunks", res.Index.NumChunks())
	}
	return p
}

// gatewayOn starts an in-process gateway over the dataset behind a loopback
// HTTP server. store, if non-nil, replaces the S3 store (to observe it).
func (p *packed) gatewayOn(t *testing.T, store s3backend.Store, cacheSize int64, policy string) (*gateway.Gateway, string) {
	t.Helper()
	return startGateway(t, gateway.Config{
		Datasets:    []gateway.DatasetSpec{{Name: "synthetic", URL: p.url, Store: store}},
		Backend:     p.server.Config(),
		CacheSize:   cacheSize,
		CachePolicy: policy,
		Defaults:    gateway.Defaults{BatchSize: 32, Window: 4, Seed: 5},
	})
}

// startGateway builds, loads and serves a gateway behind a loopback HTTP
// server, stopped when the test ends.
func startGateway(t *testing.T, cfg gateway.Config) (*gateway.Gateway, string) {
	t.Helper()
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if err := g.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(g)
	t.Cleanup(hs.Close)
	return g, hs.URL
}

// checkSample compares a served sample with the file the synthetic
// generator wrote.
func (p *packed) checkSample(t *testing.T, s client.Sample, index map[string]int) {
	t.Helper()
	i, ok := index[s.Key]
	if !ok {
		t.Fatalf("served an unknown key %q", s.Key)
	}
	want := p.spec.Sample(i)
	if !bytes.Equal(s.Files["jpg"], want.Image) || !bytes.Equal(s.Files["cls"], want.Label()) {
		t.Fatalf("sample %s differs from its source files", s.Key)
	}
}

func (p *packed) keys() map[string]int {
	m := make(map[string]int, p.spec.Samples)
	for i := range p.spec.Samples {
		m[p.spec.Sample(i).Key] = i
	}
	return m
}

// readEpoch reads one epoch for every rank through the Go client and
// returns the raw batches keyed by rank and batch, checking every sample.
func (p *packed) readEpoch(t *testing.T, url string, epoch, world int, keys map[string]int) (map[string]int, int) {
	t.Helper()
	seen := map[string]int{}
	batches := 0
	for rank := range world {
		c, err := client.New(url, client.Options{Job: api.Job{Params: shuffle.Params{Seed: 5, World: world, Rank: rank}}, Ahead: 3})
		if err != nil {
			t.Fatal(err)
		}
		for b, err := range c.Epoch(context.Background(), epoch) {
			if err != nil {
				t.Fatalf("epoch %d rank %d: %v", epoch, rank, err)
			}
			batches++
			for _, s := range b.Samples {
				p.checkSample(t, s, keys)
				seen[s.Key]++
			}
		}
	}
	return seen, batches
}

func TestGatewayEndToEnd(t *testing.T) {
	spec := synth.Spec{Samples: 1200, MeanBytes: 6 << 10, Classes: 7, Seed: 3}
	p := packToMinIO(t, spec, 256<<10)
	keys := p.keys()

	t.Run("full epoch through the client", func(t *testing.T) {
		_, url := p.gatewayOn(t, nil, 1<<30, "next-use")
		for epoch := range 2 {
			seen, _ := p.readEpoch(t, url, epoch, 3, keys)
			if len(seen) != spec.Samples {
				t.Fatalf("epoch %d: %d distinct samples, want %d", epoch, len(seen), spec.Samples)
			}
			for k, n := range seen {
				if n != 1 {
					t.Fatalf("epoch %d: %s served %d times", epoch, k, n)
				}
			}
		}
	})

	t.Run("replicas and restarts serve identical bytes", func(t *testing.T) {
		_, a := p.gatewayOn(t, nil, 64<<20, "next-use")
		_, b := p.gatewayOn(t, nil, 4*p.chunk+p.chunk, "lru")
		paths := []string{"/epoch/0/batch/0", "/epoch/2/batch/7?world=2&rank=1", "/epoch/1/batch/3?seed=99&window=2"}
		first := map[string][]byte{}
		for _, path := range paths {
			ba := fetch(t, a+path)
			if !bytes.Equal(ba, fetch(t, b+path)) {
				t.Fatalf("%s: two gateways served different bytes", path)
			}
			first[path] = ba
		}
		// A restarted gateway: a new process state over the same store.
		_, c := p.gatewayOn(t, nil, 64<<20, "next-use")
		for _, path := range paths {
			if !bytes.Equal(first[path], fetch(t, c+path)) {
				t.Fatalf("%s: a restarted gateway served different bytes", path)
			}
		}
	})

	t.Run("32 concurrent clients with a small cache", func(t *testing.T) {
		store, err := s3backend.Open(context.Background(), p.url, p.server.Config())
		if err != nil {
			t.Fatal(err)
		}
		cs := s3test.Wrap(store)
		cache := p.bytes / 3
		g, url := p.gatewayOn(t, cs, cache, "next-use")
		var wg sync.WaitGroup
		const clients = 32
		for cl := range clients {
			wg.Go(func() {
				c, err := client.New(url, client.Options{Job: api.Job{Params: shuffle.Params{Seed: 5, World: clients, Rank: cl, BatchSize: 4}}, Ahead: 2})
				if err != nil {
					t.Error(err)
					return
				}
				for epoch := range 2 {
					for b, err := range c.Epoch(context.Background(), epoch) {
						if err != nil {
							t.Errorf("client %d epoch %d: %v", cl, epoch, err)
							return
						}
						for _, s := range b.Samples {
							i, ok := keys[s.Key]
							if !ok || !bytes.Equal(s.Files["jpg"], spec.Sample(i).Image) {
								t.Errorf("client %d: sample %s has wrong bytes", cl, s.Key)
								return
							}
						}
					}
				}
			})
		}
		wg.Wait()
		if most := cs.Total().Sum().Most; most > 1 {
			t.Fatalf("the backend saw %d concurrent reads of one chunk", most)
		}
		if st := g.Cache().Stats(); st.Bytes > cache {
			t.Fatalf("cache holds %d bytes, bound %d", st.Bytes, cache)
		}
	})
}

func fetch(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body
}
