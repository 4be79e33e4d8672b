package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/cluster/peercred"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// TestClusterSkewAndHostilePeers runs four `brand serve` processes with
// client tokens and a peer secret over one MinIO, one of them serving
// another packing of the same samples (a node pointed at a re-packed copy),
// while a hostile client with a valid client token attacks the peers'
// internal endpoint. Then the dataset is re-packed in place in the middle
// of an epoch and every node reloads.
//
// What it holds to: every epoch of a job is exactly once and byte-correct
// from one index version, or the client is told (ErrIndexChanged); the
// skewed node serves none of the cluster's batches and reads nothing from
// the store; no request without a peer's credential is served by an
// internal endpoint, and the attack costs no node its life.
func TestClusterSkewAndHostilePeers(t *testing.T) {
	const nodes, world, batchSize = 4, 8, 32
	spec := synth.Spec{Samples: 2048, MeanBytes: 4 << 10, Classes: 8, Seed: 31}
	p := packToMinIO(t, spec, 128<<10)
	ctx := context.Background()
	a := p.index(t)
	// The same samples, packed with another seed into another prefix.
	skewURL := "s3://train/repacked"
	skewStore, err := s3backend.Open(ctx, skewURL, p.server.Config())
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "src")
	if err := spec.WriteTree(src); err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Pack(ctx, src, skewStore, dataset.PackOptions{ChunkSize: 128 << 10, Shuffle: true, Seed: 12, Name: "synthetic"}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	secret := filepath.Join(dir, "peer-secret")
	const token = "client-token-of-the-test"
	if err := os.WriteFile(tokens, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("peer secret of the skew test cluster\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := cmdtest.Build(t, "brand")
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+p.server.AccessKey, "AWS_SECRET_ACCESS_KEY="+p.server.SecretKey, "AWS_REGION=us-east-1")
	ports := freePorts(t, nodes)
	urls := make([]string, nodes)
	for k, port := range ports {
		urls[k] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	const skewed = 1
	procs := make([]*clusterProc, nodes)
	for k := range nodes {
		url := p.url
		if k == skewed {
			url = skewURL
		}
		procs[k] = &clusterProc{k: k, url: urls[k], logPath: filepath.Join(dir, fmt.Sprintf("node%d.log", k)),
			args: []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[k]),
				"--dataset", "synthetic=" + url, "--s3-endpoint", p.server.URL(),
				"--cache-size", strconv.FormatInt(2*p.bytes, 10), "--cache-prefault=false",
				"--peers", strings.Join(urls, ","), "--self", strconv.Itoa(k),
				"--auth-token-file", tokens, "--peer-secret-file", secret, "--max-batch-size", "256",
				"--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "0"}}
	}
	startProcs(t, procs, bin, env, token)

	// The hostile client: a client's token, forged peer headers, repeated
	// IDs of a million, sent to every node while the epochs run.
	var attacks, served atomic.Int64
	stop := make(chan struct{})
	var hostile sync.WaitGroup
	hostile.Go(func() {
		var ids []byte
		for i := range 1 << 20 {
			ids = binary.LittleEndian.AppendUint32(ids, uint32(i%64))
		}
		hc := &http.Client{Timeout: 10 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			u := urls[i%nodes] + transport.SamplesPath + "?dataset=synthetic&index=" + a.ID()
			req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(ids))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set(peercred.HeaderPeer, strconv.Itoa((i+1)%nodes))
			resp, err := hc.Do(req)
			if err != nil {
				continue // a node that closes the connection on a large refused body
			}
			attacks.Add(1)
			if resp.StatusCode != http.StatusUnauthorized {
				served.Add(1)
			}
			resp.Body.Close()
		}
	})
	defer func() {
		close(stop)
		hostile.Wait()
	}()

	keys := p.keys()
	// readEpoch reads an epoch as a job's ranks do in lock step, each
	// through its Go client routed to its home; beforeStep runs before
	// each step. It returns the samples seen up to the first error.
	readEpoch := func(epoch int, clients []*client.Client, beforeStep func(m int)) (map[string]int, error) {
		t.Helper()
		seen := map[string]int{}
		iters := make([]func() (*client.Batch, error, bool), world)
		for r := range world {
			next, stop := iter.Pull2(clients[r].Epoch(ctx, epoch))
			defer stop()
			iters[r] = next
		}
		for m := 0; ; m++ {
			if beforeStep != nil {
				beforeStep(m)
			}
			done := 0
			for r := range world {
				b, err, ok := iters[r]()
				if !ok {
					done++
					continue
				}
				if err != nil {
					return seen, fmt.Errorf("epoch %d step %d rank %d: %w", epoch, m, r, err)
				}
				if b.IndexID != clients[r].Index() {
					t.Fatalf("epoch %d step %d rank %d: a batch of index %s to a client reading %s", epoch, m, r, b.IndexID, clients[r].Index())
				}
				for _, s := range b.Samples {
					p.checkSample(t, s, keys)
					seen[s.Key]++
				}
			}
			if done == world {
				return seen, nil
			}
		}
	}
	newClients := func() []*client.Client {
		cs := make([]*client.Client, world)
		for r := range world {
			c, err := client.New("", client.Options{Peers: urls, Token: token, Ahead: 2,
				Job: api.Job{Dataset: "synthetic", Params: shuffle.Params{Seed: 9, BatchSize: batchSize, World: world, Rank: r}}})
			if err != nil {
				t.Fatal(err)
			}
			cs[r] = c
		}
		return cs
	}

	clients := newClients()
	for epoch := range 2 {
		seen, err := readEpoch(epoch, clients, nil)
		if err != nil {
			t.Fatal(err)
		}
		exactlyOnce(t, seen, spec.Samples, fmt.Sprintf("epoch %d beside a skewed node", epoch))
	}
	for r, c := range clients {
		if c.Index() != a.ID() {
			t.Errorf("rank %d read index %s; the cluster's is %s", r, c.Index(), a.ID())
		}
	}
	m := scrapeAuth(t, urls[skewed], token, "brand_cache_loads_total")
	if loads := m["brand_cache_loads_total"]; loads != 0 {
		t.Errorf("the skewed node loaded %v chunks from the store; it serves none of the cluster's batches", loads)
	}
	t.Logf("after two epochs: %d hostile requests, %d served", attacks.Load(), served.Load())
	if attacks.Load() == 0 || served.Load() != 0 {
		t.Errorf("%d hostile requests sent, %d served: an internal endpoint must take only a peer's credential", attacks.Load(), served.Load())
	}

	// Epoch 2: the dataset is re-packed in place in the middle of the
	// epoch, and every node reloads. The job, pinned to the old version,
	// reads it byte for byte or is told.
	half := spec.Samples / (batchSize * world) / 2
	seen, err := readEpoch(2, clients, func(m int) {
		if m != half {
			return
		}
		if _, err := dataset.Pack(ctx, src, p.store, dataset.PackOptions{ChunkSize: 128 << 10, Shuffle: true, Seed: 13, Name: "synthetic", Overwrite: true}); err != nil {
			t.Fatal(err)
		}
		for _, pr := range procs {
			_ = pr.cmd.Process.Signal(syscall.SIGHUP)
		}
		waitReloaded(t, urls, skewed, a.ID(), token)
	})
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("epoch 2 across the repack: sample %s delivered %d times", k, n)
		}
	}
	switch {
	case err == nil:
		exactlyOnce(t, seen, spec.Samples, "epoch 2 across the repack")
		t.Logf("epoch 2 across the repack: served whole from the old version (its chunks were cached)")
	case errors.Is(err, client.ErrIndexChanged) || strings.Contains(err.Error(), "502"):
		t.Logf("epoch 2 across the repack: %d samples, then the client was told: %v", len(seen), err)
	default:
		t.Fatalf("epoch 2 across the repack: %v", err)
	}
	// A new job reads the new version, exactly once.
	fresh := newClients()
	seen, err = readEpoch(3, fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, seen, spec.Samples, "epoch 3 of a job started after the repack")
	if fresh[0].Index() == a.ID() {
		t.Error("a job started after the repack reads the old version")
	}
}

// waitReloaded waits until every node but skip serves an index other
// than old.
func waitReloaded(t *testing.T, urls []string, skip int, old, token string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for k, u := range urls {
		if k == skip {
			continue
		}
		for {
			m := scrapeAuth(t, u, token, "brand_index_info")
			still := false
			for series := range m {
				if strings.Contains(series, `index="`+old+`"`) {
					still = true
				}
			}
			if !still {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d still serves index %s 30 s after SIGHUP", k, old)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
