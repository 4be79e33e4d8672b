package client_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/shuffle"
)

// serveProc is one `brand serve` process of a cluster on loopback.
type serveProc struct {
	url    string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

// startServeCluster packs a small synthetic dataset into a local store
// with bin and starts n `brand serve` processes over it, each given the
// same --peers list, and waits until every node is ready and sees the
// others up. The processes are stopped when the test ends.
func startServeCluster(t *testing.T, bin string, n int) []*serveProc {
	t.Helper()
	dir := t.TempDir()
	src, store := filepath.Join(dir, "src"), filepath.Join(dir, "store")
	spec := synth.Spec{Samples: 600, MeanBytes: 2 << 10, Classes: 5, Seed: 11}
	if err := spec.WriteTree(src); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "pack", "--src", src, "--dst", "file://"+store, "--chunk-size", "64KiB").CombinedOutput(); err != nil {
		t.Fatalf("brand pack: %v\n%s", err, out)
	}
	// Ports free when asked; another process could take one before the
	// node listens, which then fails the test with its log rather than
	// hang.
	var lns []net.Listener
	urls := make([]string, n)
	for k := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		urls[k] = "http://" + ln.Addr().String()
	}
	for _, ln := range lns {
		ln.Close()
	}
	// Node k is the k-th by URL, as the cluster's membership sorts them:
	// homes are positions in that order.
	slices.Sort(urls)
	procs := make([]*serveProc, n)
	for k := range n {
		p := &serveProc{url: urls[k], log: filepath.Join(dir, fmt.Sprintf("node%d.log", k)), exited: make(chan struct{})}
		logf, err := os.Create(p.log)
		if err != nil {
			t.Fatal(err)
		}
		p.cmd = exec.Command(bin, "serve", "--listen", strings.TrimPrefix(urls[k], "http://"),
			"--dataset", "syn=file://"+store, "--cache-size", "8MiB", "--cache-prefault=false", "--window", "4",
			"--peers", strings.Join(urls, ","), "--self", strconv.Itoa(k),
			"--log-level", "warn", "--log-format", "json", "--shutdown-timeout", "2s")
		p.cmd.Stdout, p.cmd.Stderr = logf, logf
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			p.cmd.Wait()
			logf.Close()
			close(p.exited)
		}()
		procs[k] = p
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for k, p := range procs {
			select {
			case <-p.exited:
			case <-time.After(20 * time.Second):
				p.kill()
				t.Errorf("node %d did not stop within 20 s", k)
			}
		}
	})
	// Ready, and every node sees every other up: a node that started
	// before its peers listened saw them down, and would read their
	// chunks itself (the same bytes, but not the layout under test).
	deadline := time.Now().Add(time.Minute)
	for k, p := range procs {
		for {
			c, err := client.New(p.url, client.Options{MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			cl, err := c.Cluster(t.Context())
			if err == nil && len(cl.Nodes) == n && cl.Nodes[cl.Self].URL == p.url && !slices.ContainsFunc(cl.Nodes, func(n api.ClusterNode) bool { return !n.Up }) {
				break
			}
			select {
			case <-p.exited:
				b, _ := os.ReadFile(p.log)
				t.Fatalf("node %d exited: %s", k, b)
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(p.log)
				t.Fatalf("node %d not ready with every peer up after a minute (last: %v, %v); log:\n%s", k, cl, err, b)
			}
		}
	}
	return procs
}

// kill ends the process at once, as a machine's loss would.
func (p *serveProc) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// TestServeClusterSameBytesAndFailover runs three real gateways as a
// cluster: every node serves a batch with the same bytes, a client with the
// peer list reads each rank through its home, and a rank whose home is
// killed in the middle of an epoch completes it with the bytes it would
// have had, from the next node.
func TestServeClusterSameBytesAndFailover(t *testing.T) {
	const nodes, world = 3, 6
	bin := cmdtest.Build(t, "brand")
	procs := startServeCluster(t, bin, nodes)
	peers := make([]string, nodes)
	for k, p := range procs {
		peers[k] = p.url
	}
	job := func(rank int) api.Job {
		return api.Job{Dataset: "syn", Params: shuffle.Params{Seed: 7, BatchSize: 8, World: world, Rank: rank}}
	}

	// The same request, byte for byte, from every node.
	for _, rank := range []int{0, 3, 5} {
		var first []byte
		for k, p := range procs {
			c, err := client.New(p.url, client.Options{Job: job(rank)})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, _, err := c.BatchRaw(t.Context(), 1, 2, &buf); err != nil {
				t.Fatalf("node %d: %v", k, err)
			}
			if k == 0 {
				first = buf.Bytes()
			} else if !bytes.Equal(buf.Bytes(), first) {
				t.Errorf("rank %d batch 2 of epoch 1: node %d sent %d bytes that differ from node 0's %d", rank, k, buf.Len(), len(first))
			}
		}
		if len(first) <= 1024 {
			t.Errorf("rank %d: a batch of %d bytes; want samples in it", rank, len(first))
		}
	}

	// Every rank reads epoch 0 through its home; together they read every
	// sample once.
	seen := map[string]int{}
	reference := map[int][][]client.Sample{} // rank -> batches
	for rank := range world {
		home := rank * nodes / world
		got := readEpoch(t, "", client.Options{Peers: peers, Job: job(rank)}, 0, func(b *client.Batch) {
			if b.Node != peers[home] {
				t.Errorf("rank %d batch %d from %s; want its home %s", rank, b.Index, b.Node, peers[home])
			}
		})
		reference[rank] = got
		for _, b := range got {
			for _, s := range b {
				seen[s.Key]++
			}
		}
	}
	if len(seen) != 600 {
		t.Errorf("the ranks read %d distinct samples; want 600", len(seen))
	}
	for key, n := range seen {
		if n != 1 {
			t.Errorf("sample %s read %d times", key, n)
		}
	}

	// Rank 5's home, node 2, dies after its batch 1; the rest of the
	// epoch comes from node 0 (2+1 mod 3), with the same samples.
	const rank = 5
	var served []string
	got := readEpoch(t, "", client.Options{Peers: peers, Job: job(rank), Ahead: 2}, 0, func(b *client.Batch) {
		served = append(served, b.Node)
		if b.Index == 1 {
			procs[2].kill()
		}
	})
	want := reference[rank]
	if len(got) != len(want) {
		t.Fatalf("after the kill: %d batches; want %d", len(got), len(want))
	}
	for i := range want {
		if !slices.EqualFunc(got[i], want[i], sameSample) {
			t.Errorf("batch %d after the kill: %q; want %q", i, keys(got[i]), keys(want[i]))
		}
	}
	if served[0] != peers[2] || served[len(served)-1] != peers[0] {
		t.Errorf("served by %v; want node 2 (the home) first and node 0 last", served)
	}
}
