package cluster

import (
	"encoding/json"
	"flag"
	"reflect"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/golden"

	"github.com/brandgw/brand/shuffle"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from the current implementation")

const goldenPath = "testdata/golden.json"

// goldenFile is the layout of testdata/golden.json: inputs with the outputs
// they must produce, forever. docs/shuffle.md §7 and the Python reference
// (../shuffle/testdata/reference.py) are checked against the same file.
// Each list's elements hold their inputs first, then their outputs.
type goldenFile struct {
	Comment   string           `json:"comment"`
	IndexKeys []goldenKey      `json:"index_keys"`
	Rankings  []goldenRanking  `json:"rankings"`
	Balanced  []goldenBalanced `json:"balanced"`
	Homes     []goldenHomes    `json:"homes"`
	Assign    []goldenAssign   `json:"assign"`
	Jobs      []goldenJob      `json:"jobs"`
	// Memberships are member lists as a source gives them, with the
	// membership they make: sorted, distinct, its version and IDs.
	Memberships []goldenMembership `json:"memberships"`
}

type goldenMembership struct {
	Given []string `json:"given"`

	Members []string `json:"members"`
	Version string   `json:"version"`
	IDs     []uint64 `json:"ids"`
}

type goldenKey struct {
	ID  string `json:"id"`
	Key uint64 `json:"key"`
}

type goldenRanking struct {
	IndexID string `json:"index_id"`
	Chunk   int    `json:"chunk"`
	Nodes   int    `json:"nodes"`

	Scores  []uint64 `json:"scores"` // by node
	Owner   int      `json:"owner"`
	Ranking []int    `json:"ranking"`
}

// goldenBalanced is the bounded-load ownership of one index's chunks.
type goldenBalanced struct {
	IndexID string `json:"index_id"`
	Counts  []int  `json:"counts"`
	Nodes   int    `json:"nodes"`

	Owners []int `json:"owners"` // by chunk
}

type goldenHomes struct {
	World int `json:"world"`
	Nodes int `json:"nodes"`

	Homes []int `json:"homes"` // by rank
}

type goldenAssign struct {
	Name  string `json:"name"`
	IDs   []int  `json:"ids"`
	Owner []int  `json:"owner"`
	Share []int  `json:"share"`
	Nodes int    `json:"nodes"`

	Ranks [][]int `json:"ranks"`
	Moved int     `json:"moved"`
}

// goldenJob is a whole job on a cluster of two or more nodes: bounded
// ownership, the epoch's order (the single gateway's: a cluster does not
// change it), and every batch, assigned or plainly cut. Members, if
// given, name the nodes (their MemberIDs score them, Nodes is their
// number); else the nodes are positions (Positions).
type goldenJob struct {
	Name      string   `json:"name"`
	IndexID   string   `json:"index_id"`
	Nodes     int      `json:"nodes"`
	Members   []string `json:"members"`
	Counts    []int    `json:"counts"`
	Seed      uint64   `json:"seed"`
	Epoch     uint64   `json:"epoch"`
	Window    int      `json:"window"`
	BatchSize int      `json:"batch_size"`
	World     int      `json:"world"`
	DropLast  bool     `json:"drop_last"`
	Locality  bool     `json:"locality"`

	Owners     []int     `json:"owners"`
	ChunkOrder []int     `json:"chunk_order"`
	Batches    [][][]int `json:"batches"` // [batch][rank] -> sample IDs
}

// goldenInputs are the inputs pinned by the golden file. Add one here and
// run `go test ./cluster -run TestGolden -update`; never edit outputs by
// hand, and never change an existing one: that changes every cluster's
// layout and order.
func goldenInputs() goldenFile {
	const ix = "3a6958a385d5afc5" // docs/format.md's example index
	var rankings []goldenRanking
	for _, nodes := range []int{1, 2, 3, 4, 16} {
		for _, c := range []int{0, 1, 7, 1000000} {
			rankings = append(rankings, goldenRanking{IndexID: ix, Chunk: c, Nodes: nodes})
		}
	}
	rankings = append(rankings,
		goldenRanking{IndexID: "c0ffee0000000001", Chunk: 5, Nodes: 5},
		goldenRanking{IndexID: "", Chunk: 0, Nodes: 3},
	)
	sizes := []int{5, 0, 7, 3, 6, 6, 2, 0, 4, 8, 1, 5, 6, 3, 7, 2, 4, 5, 0, 6, 3, 2, 8, 4}
	eight := []int{2, 2, 2, 2, 2, 2, 2, 2}
	hundreds := make([]int, 64)
	uneven := make([]int, 32)
	for c := range hundreds {
		hundreds[c] = 100
	}
	for c := range uneven {
		uneven[c] = 90 + c%21
	}
	return goldenFile{
		Comment: "Brand cluster golden vectors; see docs/shuffle.md §7. Regenerate with go test ./cluster -run TestGolden -update, which changes every cluster's layout: do not.",
		IndexKeys: []goldenKey{
			{ID: ""}, {ID: "a"}, {ID: "foobar"}, {ID: ix}, {ID: "0000000000000000"}, {ID: "ffffffffffffffff"},
		},
		Rankings: rankings,
		Balanced: []goldenBalanced{
			{IndexID: ix, Counts: eight, Nodes: 3},
			{IndexID: ix, Counts: hundreds, Nodes: 4},
			{IndexID: "c0ffee0000000001", Counts: uneven, Nodes: 4},
			{IndexID: ix, Counts: sizes, Nodes: 5},
			// Chunk 0 fits under no node's bound: the least loaded takes it.
			{IndexID: ix, Counts: []int{1000, 1, 1, 1, 1, 500}, Nodes: 2},
			{IndexID: ix, Counts: []int{0, 0, 0}, Nodes: 2},
		},
		Homes: []goldenHomes{
			{World: 8, Nodes: 4}, {World: 3, Nodes: 2}, {World: 2, Nodes: 4}, {World: 1, Nodes: 3},
			{World: 7, Nodes: 3}, {World: 16, Nodes: 5}, {World: 5, Nodes: 5},
		},
		Assign: []goldenAssign{
			{Name: "hand-two-nodes", IDs: []int{10, 20, 30, 40, 50, 60, 70, 80}, Owner: []int{0, 1, 0, 0, 0, 1, 0, 1}, Share: []int{2, 2, 2, 2}, Nodes: 2},
			{Name: "node-without-ranks", IDs: []int{5, 4, 3, 2, 1}, Owner: []int{2, 2, 2, 2, 2}, Share: []int{3, 2}, Nodes: 3},
			{Name: "already-local", IDs: []int{9, 8, 7, 6, 5, 4}, Owner: []int{0, 0, 1, 1, 2, 2}, Share: []int{2, 2, 2}, Nodes: 3},
			{Name: "one-node", IDs: []int{3, 1, 2}, Owner: []int{0, 0, 0}, Share: []int{1, 1, 1}, Nodes: 1},
			{Name: "equal-surpluses", IDs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Owner: []int{1, 0, 1, 0, 1, 0, 1, 0}, Share: []int{2, 2, 2, 2}, Nodes: 4},
			{Name: "split-surplus", IDs: []int{11, 12, 13, 14, 15, 16}, Owner: []int{0, 0, 0, 0, 2, 0}, Share: []int{1, 1, 2, 2}, Nodes: 3},
			{Name: "short-final-batch", IDs: []int{40, 41, 42, 43, 44}, Owner: []int{3, 3, 0, 3, 1}, Share: []int{2, 2, 1, 0, 0, 0, 0, 0}, Nodes: 4},
			{Name: "empty", IDs: []int{}, Owner: []int{}, Share: []int{0, 0}, Nodes: 2},
		},
		Jobs: []goldenJob{
			// docs/shuffle.md §7.3.
			{Name: "worked-example", IndexID: ix, Nodes: 3, Counts: eight, Seed: 1, Epoch: 0, Window: 4, BatchSize: 2, World: 4, Locality: true},
			{Name: "worked-example-no-locality", IndexID: ix, Nodes: 3, Counts: eight, Seed: 1, Epoch: 0, Window: 4, BatchSize: 2, World: 4},
			{Name: "uneven", IndexID: ix, Nodes: 4, Counts: sizes, Seed: 7, Epoch: 2, Window: 8, BatchSize: 5, World: 8, Locality: true},
			{Name: "uneven-drop-last", IndexID: ix, Nodes: 4, Counts: sizes, Seed: 7, Epoch: 2, Window: 8, BatchSize: 5, World: 8, DropLast: true, Locality: true},
			{Name: "fewer-ranks-than-nodes", IndexID: ix, Nodes: 4, Counts: sizes, Seed: 7, Epoch: 2, Window: 6, BatchSize: 9, World: 3, Locality: true},
			{Name: "bound-binds", IndexID: ix, Nodes: 4, Counts: hundreds[:24], Seed: 3, Epoch: 0, Window: 8, BatchSize: 50, World: 4, Locality: true},
			{Name: "named-members", IndexID: ix, Nodes: 3, Members: []string{"http://brand-0.brand:8080", "http://brand-1.brand:8080", "http://brand-2.brand:8080"},
				Counts: sizes, Seed: 7, Epoch: 1, Window: 6, BatchSize: 4, World: 6, Locality: true},
		},
		Memberships: []goldenMembership{
			{Given: []string{"http://a:1"}},
			{Given: []string{"http://brand-1.brand:8080", "http://brand-0.brand:8080/", "http://brand-2.brand:8080"}},
			{Given: []string{"http://brand-0.brand:8080", "http://brand-1.brand:8080", "http://brand-2.brand:8080"}},
			{Given: []string{"https://x.example:443", "http://10.0.0.1:8080", "http://10.0.0.1:8080"}},
		},
	}
}

// computeGolden returns a copy of g with every output computed by the Go
// implementation; g itself is left alone.
func computeGolden(t *testing.T, g goldenFile) goldenFile {
	t.Helper()
	g = cloneGolden(t, g)
	for i := range g.IndexKeys {
		g.IndexKeys[i].Key = IndexKey(g.IndexKeys[i].ID)
	}
	for i := range g.Rankings {
		g.Rankings[i] = computeRanking(g.Rankings[i])
	}
	for i := range g.Balanced {
		b := &g.Balanced[i]
		b.Owners = BoundedOwners(IndexKey(b.IndexID), b.Counts, Positions(b.Nodes))
	}
	for i := range g.Homes {
		h := &g.Homes[i]
		h.Homes = make([]int, h.World)
		for r := range h.Homes {
			h.Homes[r] = Home(r, h.World, h.Nodes)
		}
	}
	for i := range g.Assign {
		g.Assign[i] = computeAssign(t, g.Assign[i])
	}
	for i := range g.Jobs {
		g.Jobs[i] = computeJob(t, g.Jobs[i])
	}
	for i := range g.Memberships {
		m := &g.Memberships[i]
		ms, err := NewMembership(m.Given)
		if err != nil {
			t.Fatalf("membership %v: %v", m.Given, err)
		}
		m.Members, m.Version, m.IDs = ms.Members(), ms.Version(), ms.IDs()
	}
	return g
}

func computeRanking(r goldenRanking) goldenRanking {
	key := IndexKey(r.IndexID)
	r.Scores = make([]uint64, r.Nodes)
	for k := range r.Scores {
		r.Scores[k] = score(key, r.Chunk, uint64(k))
	}
	r.Owner = Owner(key, r.Chunk, Positions(r.Nodes))
	r.Ranking = Ranking([]int{}, key, r.Chunk, Positions(r.Nodes))
	return r
}

func computeAssign(t *testing.T, a goldenAssign) goldenAssign {
	t.Helper()
	got, err := Assign(a.IDs, a.Owner, a.Share, a.Nodes)
	if err != nil {
		t.Fatalf("%s: Assign: %v", a.Name, err)
	}
	a.Ranks, a.Moved = got.Ranks, got.Moved
	return a
}

// computeJob lays out a job as a gateway with peers does (docs/shuffle.md
// §7): the epoch's order, bounded owners, then each global batch assigned
// to the ranks, or cut plainly without locality.
func computeJob(t *testing.T, j goldenJob) goldenJob {
	t.Helper()
	if j.Nodes < 2 {
		t.Fatalf("%s: a cluster job needs 2 or more nodes; with one a gateway serves §5–§6 unchanged", j.Name)
	}
	ids := Positions(j.Nodes)
	if len(j.Members) > 0 {
		ms, err := NewMembership(j.Members)
		if err != nil || ms.Len() != j.Nodes {
			t.Fatalf("%s: members %v (%v) are not %d nodes", j.Name, j.Members, err, j.Nodes)
		}
		ids = ms.IDs()
	}
	j.Owners = BoundedOwners(IndexKey(j.IndexID), j.Counts, ids)
	e, err := shuffle.NewEpoch(j.Counts, j.Seed, j.Epoch, j.Window)
	if err != nil {
		t.Fatalf("%s: NewEpoch: %v", j.Name, err)
	}
	j.ChunkOrder = append([]int{}, e.ChunkOrder()...)
	chunkOf := make([]int, 0, e.NumSamples())
	for c, n := range j.Counts {
		for range n {
			chunkOf = append(chunkOf, c)
		}
	}
	n := e.NumSamples()
	j.Batches = make([][][]int, shuffle.NumBatches(n, j.BatchSize, j.World, j.DropLast))
	for m := range j.Batches {
		share := make([]int, j.World)
		lo, hi := n, 0
		for r := range j.World {
			s, e, err := shuffle.BatchRange(n, m, j.BatchSize, j.World, r, j.DropLast)
			if err != nil {
				t.Fatalf("%s: BatchRange(%d, rank %d): %v", j.Name, m, r, err)
			}
			share[r] = e - s
			lo, hi = min(lo, s), max(hi, e)
		}
		ids := e.AppendRange([]int{}, lo, hi)
		if !j.Locality {
			j.Batches[m] = make([][]int, j.World)
			pos := 0
			for r, s := range share {
				j.Batches[m][r] = ids[pos : pos+s]
				pos += s
			}
			continue
		}
		owner := make([]int, len(ids))
		for i, id := range ids {
			owner[i] = j.Owners[chunkOf[id]]
		}
		a, err := Assign(ids, owner, share, j.Nodes)
		if err != nil {
			t.Fatalf("%s: Assign(batch %d): %v", j.Name, m, err)
		}
		j.Batches[m] = a.Ranks
	}
	return j
}

// cloneGolden returns a deep copy of g, so that the outputs of two
// implementations never share memory.
func cloneGolden(t *testing.T, g goldenFile) goldenFile {
	t.Helper()
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var c goldenFile
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// clearOutputs returns a copy of g's inputs only, so that a check
// recomputes from the file's own inputs rather than goldenInputs.
func clearOutputs(t *testing.T, g goldenFile) goldenFile {
	t.Helper()
	g = cloneGolden(t, g)
	for i := range g.IndexKeys {
		g.IndexKeys[i].Key = 0
	}
	for i := range g.Rankings {
		r := &g.Rankings[i]
		r.Scores, r.Owner, r.Ranking = nil, 0, nil
	}
	for i := range g.Balanced {
		g.Balanced[i].Owners = nil
	}
	for i := range g.Homes {
		g.Homes[i].Homes = nil
	}
	for i := range g.Assign {
		g.Assign[i].Ranks, g.Assign[i].Moved = nil, 0
	}
	for i := range g.Jobs {
		j := &g.Jobs[i]
		j.Owners, j.ChunkOrder, j.Batches = nil, nil, nil
	}
	for i := range g.Memberships {
		m := &g.Memberships[i]
		m.Members, m.Version, m.IDs = nil, "", nil
	}
	return g
}

func TestGolden(t *testing.T) {
	fresh := computeGolden(t, goldenInputs())
	if *update {
		golden.Write(t, goldenPath, fresh)
	}
	want := readGolden(t)
	got := computeGolden(t, clearOutputs(t, readGolden(t)))
	compareGolden(t, "go", got, want)

	// The file holds what goldenInputs holds, so that adding an input
	// without -update is caught.
	if in, file := clearOutputs(t, fresh), clearOutputs(t, readGolden(t)); !reflect.DeepEqual(in, file) {
		t.Errorf("%s's inputs differ from goldenInputs (run with -update after adding inputs)", goldenPath)
	}
}

// compareGolden reports every output of got that differs from want; who
// names the implementation that computed got.
func compareGolden(t *testing.T, who string, got, want goldenFile) {
	t.Helper()
	check := func(what string, i int, g, w any) {
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s %d: %s computes\n %+v\nwant %+v", what, i, who, g, w)
		}
	}
	if len(got.IndexKeys) != len(want.IndexKeys) || len(got.Rankings) != len(want.Rankings) || len(got.Balanced) != len(want.Balanced) ||
		len(got.Homes) != len(want.Homes) || len(got.Assign) != len(want.Assign) || len(got.Jobs) != len(want.Jobs) ||
		len(got.Memberships) != len(want.Memberships) {
		t.Fatalf("%s computes %d index keys, %d rankings, %d balanced, %d homes, %d assignments, %d jobs; want %d, %d, %d, %d, %d, %d", who,
			len(got.IndexKeys), len(got.Rankings), len(got.Balanced), len(got.Homes), len(got.Assign), len(got.Jobs),
			len(want.IndexKeys), len(want.Rankings), len(want.Balanced), len(want.Homes), len(want.Assign), len(want.Jobs))
	}
	for i := range want.IndexKeys {
		check("index key", i, got.IndexKeys[i], want.IndexKeys[i])
	}
	for i := range want.Rankings {
		check("ranking", i, got.Rankings[i], want.Rankings[i])
	}
	for i := range want.Balanced {
		check("balanced", i, got.Balanced[i], want.Balanced[i])
	}
	for i := range want.Homes {
		check("homes", i, got.Homes[i], want.Homes[i])
	}
	for i := range want.Assign {
		check("assignment "+want.Assign[i].Name, i, got.Assign[i], want.Assign[i])
	}
	for i := range want.Jobs {
		check("job "+want.Jobs[i].Name, i, got.Jobs[i], want.Jobs[i])
	}
	for i := range want.Memberships {
		check("membership", i, got.Memberships[i], want.Memberships[i])
	}
}

func readGolden(t *testing.T) goldenFile {
	t.Helper()
	var g goldenFile
	golden.Read(t, goldenPath, &g)
	return g
}
