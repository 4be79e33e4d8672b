package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/s3face/s3auth"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
)

// goroutines returns the stacks of the goroutines that run code of this
// module, by goroutine ID, leaving out the caller's own.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the caller's
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
		if strings.Contains(g, "github.com/brandgw/brand/") {
			out[id] = g
		}
	}
	return out
}

// leftSince returns the stacks of the module's goroutines that were not
// running at before. A goroutine that has told its owner it is done may
// still be returning: those are given a moment, not a second.
func leftSince(before map[string]string) []string {
	var left []string
	for range 50 {
		left = left[:0]
		for id, g := range goroutines() {
			if _, ok := before[id]; !ok {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	slices.Sort(left)
	return left
}

// lifeGateway is a gateway, loaded, behind a server, closed by the test
// itself (and by a cleanup only if the test stops before).
type lifeGateway struct {
	g   *gateway.Gateway
	srv *httptest.Server
	s3  *httptest.Server
	// closed: the test closed it.
	closed bool
}

func (l *lifeGateway) close() {
	if l.closed {
		return
	}
	l.closed = true
	if l.s3 != nil {
		l.s3.Close()
	}
	l.srv.Close()
	l.g.Close()
}

// newLifeGateways builds n gateways of one cluster (n > 1) or one
// gateway over store, each configured by mutate, and serves them.
func newLifeGateways(t *testing.T, n int, store s3backend.Store, mutate func(*gateway.Config)) []*lifeGateway {
	t.Helper()
	lns, urls := loopbacks(t, n)
	out := make([]*lifeGateway, n)
	for k := range n {
		cfg := gateway.Config{
			Datasets:  []gateway.DatasetSpec{{Name: "test", URL: "file:///fixture", Store: store}},
			CacheSize: 64 << 20,
			Defaults:  gateway.Defaults{BatchSize: 8, Window: 2, Seed: 42},
			Planner:   planner.ForGateway{},
		}
		if n > 1 {
			cfg.Cluster = gateway.ClusterConfig{Peers: urls, Self: k, ProbeInterval: 20 * time.Millisecond, PeerTimeout: 2 * time.Second}
		}
		if mutate != nil {
			mutate(&cfg)
		}
		g, err := gateway.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Load(context.Background()); err != nil {
			g.Close()
			t.Fatal(err)
		}
		l := &lifeGateway{g: g, srv: &httptest.Server{Listener: lns[k], Config: &http.Server{Handler: g}}}
		l.srv.Start()
		if h := g.S3Handler(); h != nil {
			l.s3 = httptest.NewServer(h)
		}
		out[k] = l
	}
	t.Cleanup(func() {
		for _, l := range out {
			l.close()
		}
	})
	return out
}

// TestCloseLeavesNoGoroutine starts a gateway of each shape, serves some
// of each kind of work it does in the background (prefetch, the
// optimum's computation, a cluster's probes, polls and fetches ahead,
// the disk tier's writes, transforms and the batches made ahead, the S3
// face's read-ahead and read-through blocks), closes it, and checks that
// no goroutine of this module started since is left.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	f := newFixture(t, 16, 8) // 128 samples, 16 batches of 8
	f.addMembers(t)
	other := newFixtureNamed(t, t.TempDir(), "other/", 4, 8, 0)
	images := newImageFixture(t, 8, 8, smallPhotos(t))
	creds, err := s3auth.ParseCredentials(strings.NewReader(s3ID + " " + s3Secret + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	rawDir := t.TempDir()
	raw, err := s3backend.NewLocal(rawDir)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB: 3 blocks of 1 MiB
	if _, err := raw.Put(context.Background(), "shards/big.bin", bytes.NewReader(big), int64(len(big))); err != nil {
		t.Fatal(err)
	}
	epoch := func(t *testing.T, base, q string) {
		t.Helper()
		readRank(t, base, q, 0, 16)
		if resp, body := get(t, base+"/stats"); resp.StatusCode != http.StatusOK {
			t.Fatalf("/stats: %s: %s", resp.Status, body)
		}
	}
	tests := []struct {
		name   string
		nodes  int
		store  s3backend.Store
		mutate func(*gateway.Config)
		work   func(t *testing.T, gs []*lifeGateway)
	}{
		{"single", 1, f.store, func(c *gateway.Config) {
			c.Datasets = append(c.Datasets, gateway.DatasetSpec{Name: "other", URL: "file:///other", Store: other.store})
		}, func(t *testing.T, gs []*lifeGateway) {
			epoch(t, gs[0].srv.URL, "")
			readRank(t, gs[0].srv.URL, "mix=test:0.5,other:0.5", 0, 4)
		}},
		{"cluster", 3, f.store, nil, func(t *testing.T, gs []*lifeGateway) {
			for r := range 3 {
				readRank(t, gs[r].srv.URL, fmt.Sprintf("world=3&rank=%d&batch_size=4", r), 0, 10)
			}
		}},
		{"disk tier", 1, f.store, func(c *gateway.Config) {
			c.CacheSize = datasetBytes(f) / 4
			c.DiskCache = gateway.DiskCacheConfig{Dirs: []string{t.TempDir()}, Size: 2 * datasetBytes(f)}
		}, func(t *testing.T, gs []*lifeGateway) {
			epoch(t, gs[0].srv.URL, "")
		}},
		{"transforms", 1, images.store, func(c *gateway.Config) {
			c.Transforms = testTransforms(t)
			c.TransformWorkers = 2
		}, func(t *testing.T, gs []*lifeGateway) {
			readRank(t, gs[0].srv.URL, "transform=tiny", 0, 6)
		}},
		{"transforms on a cluster", 2, images.store, func(c *gateway.Config) {
			c.Transforms = testTransforms(t)
			c.TransformWorkers = 2
		}, func(t *testing.T, gs []*lifeGateway) {
			readRank(t, gs[0].srv.URL, "transform=tiny&world=2&rank=0", 0, 3)
			readRank(t, gs[1].srv.URL, "transform=tiny&world=2&rank=1", 0, 3)
		}},
		{"S3 face", 1, f.store, func(c *gateway.Config) {
			c.S3 = gateway.S3Config{Credentials: creds, Block: 1 << 20, WholeObject: 1 << 20,
				Buckets: []gateway.S3Bucket{{Name: "raw", URL: "file://" + rawDir, Store: raw}}}
		}, func(t *testing.T, gs []*lifeGateway) {
			mc := s3Client(t, gs[0].s3.URL, s3ID, s3Secret)
			for _, name := range []string{"class0/sample00000.jpg", "class1/sample00010.jpg", "class2/sample00020.jpg"} {
				readObject(t, mc, name, minio.GetObjectOptions{})
			}
			if got, err := readBucketObject(mc, "raw", "shards/big.bin", minio.GetObjectOptions{}); err != nil || !bytes.Equal(got, big) {
				t.Fatalf("read-through object: %v (%d bytes)", err, len(got))
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := goroutines()
			gs := newLifeGateways(t, tc.nodes, tc.store, tc.mutate)
			tc.work(t, gs)
			for _, l := range gs {
				l.close()
			}
			http.DefaultClient.CloseIdleConnections()
			if left := leftSince(before); len(left) > 0 {
				t.Fatalf("%d goroutines of Brand's outlived Close:\n\n%s", len(left), strings.Join(left, "\n\n"))
			}
		})
	}
}

// TestShutdownOrder: Close drains the parts that run goroutines in the
// reverse of the order New builds them — each after every part built on
// it — as data, not as a list of Close calls a comment keeps in order.
func TestShutdownOrder(t *testing.T) {
	f := newFixture(t, 4, 4)
	gs := newLifeGateways(t, 2, f.store, func(c *gateway.Config) {
		c.DiskCache = gateway.DiskCacheConfig{Dirs: []string{t.TempDir()}, Size: 1 << 20}
	})
	want := []string{
		"membership: polls, warm-ups, kept versions", // warms up through the hand-over: the cache, the peers
		"visit: premade batches",                     // reads through the stage, the reader, the preloads, the next batches' fetches
		"tensors: workers",                           // its buffers are the reader's
		"usetable: prefetch",                         // reads into the cache, tallied by the statistics
		"livestats: optima",
		"preload: loads",          // read into the cache
		"peer: chunks given back", // copied into the cache
		"chunkcache: loads, spills",
		"disktier: writes", // the cache's spills write it
		"route: next batches' samples",
		"storepath: probes", // end the store reads; ask the peers what they read for this node
		"peer: probes",      // tell the membership, fetch for the router
		"catalog: index polls",
	}
	if got := gs[0].g.ShutdownOrder(); !slices.Equal(got, want) {
		t.Fatalf("shutdown order:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
