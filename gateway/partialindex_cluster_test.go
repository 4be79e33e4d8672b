package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/catalog"
)

// partitioned gives each node of a cluster a partial index: its own
// chunks' sample tables in memory, the others' read when needed.
func partitioned(c *gateway.Config) {
	ms, err := cluster.NewMembership(c.Cluster.Peers)
	if err != nil {
		panic(err)
	}
	for i := range c.Datasets {
		c.Datasets[i].Partition = catalog.Partition{Self: c.Cluster.Peers[c.Cluster.Self], Members: ms}
	}
}

// TestClusterPartialIndex: nodes that keep only their own chunks' sample
// tables serve the same bytes as nodes that keep them all, read each
// other chunk's table from the stored index at most once, and only for a
// batch that needs it.
func TestClusterPartialIndex(t *testing.T) {
	f := newFixture(t, 32, 16) // 512 samples
	const nodes, world, batch = 4, 4, 8
	batches := 512 / (world * batch)
	whole := startCluster(t, f, nodes, nil, nil)
	part := startCluster(t, f, nodes, nil, partitioned)
	ms := membershipOf(t, part)
	owner := ms.Owners(cluster.IndexKey(f.index.ID()), f.index.SampleCounts())
	chunkOf := map[string]int{}
	for c := range f.index.NumChunks() {
		chunkOf[f.index.Chunk(c).Key] = c
	}
	loads := func(n *clusterNode) float64 { return metricSum(t, n.srv.URL, "brand_index_table_loads_total") }

	// Each node keeps its own chunks' tables and no other.
	for k, n := range part {
		own := 0
		for _, o := range owner {
			if o == ms.Index(n.srv.URL) {
				own++
			}
		}
		if got := metric(t, n.srv.URL, fmt.Sprintf(`brand_index_tables{dataset="test",index=%q,kind="resident"}`, f.index.ID())); int(got) != own {
			t.Errorf("node %d keeps %v tables, owns %d chunks", k, got, own)
		}
	}

	// One batch whose samples are mostly other nodes' (no locality): the
	// node reads the tables of exactly the batch's chunks it does not own.
	q := func(r int) string {
		return fmt.Sprintf("seed=5&window=4&batch_size=%d&world=%d&rank=%d&locality=false", batch, world, r)
	}
	last := batches - 1 // no next batch to fetch ahead
	checked := 0        // ranks whose batch holds another node's chunk
	for r := range world {
		k := cluster.Home(r, world, nodes)
		_, mbody := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s&format=json", whole[k].srv.URL, last, q(r)))
		var m api.Manifest
		if err := json.Unmarshal(mbody, &m); err != nil {
			t.Fatalf("manifest: %v: %s", err, mbody)
		}
		others := map[int]bool{}
		for _, s := range m.Samples {
			if c := chunkOf[s.Chunk]; owner[c] != k {
				others[c] = true
			}
		}
		before := loads(part[k])
		resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", part[k].srv.URL, last, q(r)))
		_, want := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s", whole[k].srv.URL, last, q(r)))
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
			t.Fatalf("rank %d batch %d from a node with a partial index: %s, %d bytes; whole index: %d bytes", r, last, resp.Status, len(body), len(want))
		}
		if len(others) == 0 {
			continue // owners hash by the nodes' loopback URLs: all of its chunks may be the home's
		}
		checked++
		if got := loads(part[k]) - before; got > float64(len(others)) {
			t.Errorf("rank %d batch %d: node %d read %v tables for the %d chunks of the batch it does not own", r, last, k, got, len(others))
		}
	}
	if checked == 0 {
		t.Fatalf("no rank's batch %d holds a sample of another node's chunk: the test needs some", last)
	}

	// A whole epoch, every rank from its home, byte for byte as the
	// whole-index cluster serves it; each table read at most once.
	seen := map[string]int{}
	for r := range world {
		k := cluster.Home(r, world, nodes)
		got := readRank(t, part[k].srv.URL, q(r), 1, batches)
		want := readRank(t, whole[k].srv.URL, q(r), 1, batches)
		for m := range got {
			if !bytes.Equal(got[m], want[m]) {
				t.Fatalf("rank %d batch %d differs between the partial and the whole index", r, m)
			}
			f.verify(t, readTar(t, got[m]), seen)
		}
	}
	exactlyOnce(t, seen, 512, "epoch 1 from nodes with partial indexes")
	for k, n := range part {
		notOwned := 0
		for _, o := range owner {
			if o != k {
				notOwned++
			}
		}
		if l := loads(n); l > float64(notOwned) {
			t.Errorf("node %d read %v tables, more than the %d chunks it does not own", k, l, notOwned)
		}
		if u := metricSum(t, n.srv.URL, "brand_index_table_unprepared_loads_total"); u != 0 {
			t.Errorf("node %d read %v tables without a Prepare", k, u)
		}
	}

	// A sample by key, and its manifest entry, from a node that does not
	// own its chunk.
	key := f.index.SampleKey(100)
	c := f.index.ChunkOf(100)
	k := (owner[c] + 1) % nodes
	resp, body := get(t, part[k].srv.URL+"/samples/"+key)
	_, want := get(t, whole[k].srv.URL+"/samples/"+key)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
		t.Fatalf("sample %q from node %d, which does not own chunk %d: %s", key, k, c, resp.Status)
	}
	if ss := readTar(t, body); len(ss) != 1 || ss[0].key != key {
		t.Fatalf("sample %q: got %d samples", key, len(ss))
	}
	if resp, _ := get(t, part[k].srv.URL+"/samples/no/such/key"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown key: %s, want 404", resp.Status)
	}
}

// TestClusterPartialIndexFailover: a node asked for samples whose owner
// is down reads their tables and chunks itself.
func TestClusterPartialIndexFailover(t *testing.T) {
	f := newFixture(t, 16, 16)
	const nodes = 3
	part := startCluster(t, f, nodes, nil, partitioned)
	whole := startCluster(t, f, nodes, nil, nil)
	q := "seed=9&window=4&batch_size=16&locality=false"
	want := readRank(t, whole[0].srv.URL, q, 0, 256/16)
	part[2].srv.CloseClientConnections()
	part[2].srv.Close()
	got := readRank(t, part[0].srv.URL, q, 0, 256/16)
	for m := range got {
		if !bytes.Equal(got[m], want[m]) {
			t.Fatalf("batch %d with node 2 down differs from the whole-index cluster's", m)
		}
	}
	// Node 2's chunks were read by node 0 or 1 instead: node 1 only for
	// node 0's requests, with the tables of chunks it does not own.
	t.Logf("table loads: node 0 %v, node 1 %v", metricSum(t, part[0].srv.URL, "brand_index_table_loads_total"),
		metricSum(t, part[1].srv.URL, "brand_index_table_loads_total"))
	for k := range 2 {
		if u := metricSum(t, part[k].srv.URL, "brand_index_table_unprepared_loads_total"); u != 0 {
			t.Errorf("node %d read %v tables without a Prepare", k, u)
		}
	}
}
