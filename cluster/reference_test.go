package cluster

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// referencePath is the Python reference of docs/shuffle.md, which
// implements §7 (clusters) beside the shuffle. Its driver reads a file of
// inputs laid out like testdata/golden.json and prints the outputs in the
// same layout.
const referencePath = "../shuffle/testdata/reference.py"

// runReference runs the Python reference on the inputs of g (its outputs
// are ignored) and returns what it computes, with g's inputs.
func runReference(t *testing.T, g goldenFile) goldenFile {
	t.Helper()
	in := clearOutputs(t, g)
	// The reference prints outputs only (and names); put them beside the
	// inputs, which Go then recomputes from.
	var ref struct {
		IndexKeys []struct {
			Key uint64 `json:"key"`
		} `json:"index_keys"`
		Rankings []struct {
			Scores  []uint64 `json:"scores"`
			Owner   int      `json:"owner"`
			Ranking []int    `json:"ranking"`
		} `json:"rankings"`
		Balanced []struct {
			Owners []int `json:"owners"`
		} `json:"balanced"`
		Homes []struct {
			Homes []int `json:"homes"`
		} `json:"homes"`
		Assign []struct {
			Ranks [][]int `json:"ranks"`
			Moved int     `json:"moved"`
		} `json:"assign"`
		Jobs []struct {
			Owners     []int     `json:"owners"`
			ChunkOrder []int     `json:"chunk_order"`
			Batches    [][][]int `json:"batches"`
		} `json:"jobs"`
		Memberships []struct {
			Members []string `json:"members"`
			Version string   `json:"version"`
			IDs     []uint64 `json:"ids"`
		} `json:"memberships"`
	}
	pythontest.Reference(t, referencePath, in, &ref, time.Minute)
	if len(ref.IndexKeys) != len(in.IndexKeys) || len(ref.Rankings) != len(in.Rankings) || len(ref.Balanced) != len(in.Balanced) ||
		len(ref.Homes) != len(in.Homes) || len(ref.Assign) != len(in.Assign) || len(ref.Jobs) != len(in.Jobs) ||
		len(ref.Memberships) != len(in.Memberships) {
		t.Fatalf("reference printed %d index keys, %d rankings, %d balanced, %d homes, %d assignments, %d jobs for %d, %d, %d, %d, %d, %d",
			len(ref.IndexKeys), len(ref.Rankings), len(ref.Balanced), len(ref.Homes), len(ref.Assign), len(ref.Jobs),
			len(in.IndexKeys), len(in.Rankings), len(in.Balanced), len(in.Homes), len(in.Assign), len(in.Jobs))
	}
	for i, r := range ref.IndexKeys {
		in.IndexKeys[i].Key = r.Key
	}
	for i, r := range ref.Rankings {
		in.Rankings[i].Scores, in.Rankings[i].Owner, in.Rankings[i].Ranking = r.Scores, r.Owner, r.Ranking
	}
	for i, r := range ref.Balanced {
		in.Balanced[i].Owners = r.Owners
	}
	for i, r := range ref.Homes {
		in.Homes[i].Homes = r.Homes
	}
	for i, r := range ref.Assign {
		in.Assign[i].Ranks, in.Assign[i].Moved = r.Ranks, r.Moved
	}
	for i, r := range ref.Jobs {
		in.Jobs[i].Owners, in.Jobs[i].ChunkOrder, in.Jobs[i].Batches = r.Owners, r.ChunkOrder, r.Batches
	}
	for i, r := range ref.Memberships {
		m := &in.Memberships[i]
		m.Members, m.Version, m.IDs = r.Members, r.Version, r.IDs
	}
	return in
}

// TestPythonReference runs the independent Python implementation of
// docs/shuffle.md §7 on the golden inputs and requires it to agree with Go
// on every output.
func TestPythonReference(t *testing.T) {
	golden := readGolden(t)
	compareGolden(t, "python", runReference(t, golden), computeGolden(t, clearOutputs(t, golden)))
}

// TestPythonReferenceRandom compares Go and the Python reference on random
// inputs: index IDs, chunks and node counts for rankings, bounded owners,
// homes, the random global batches of the Assign property tests, and small
// jobs.
func TestPythonReferenceRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 19))
	var in goldenFile
	for range 100 {
		id := fmt.Sprintf("%016x", r.Uint64())
		in.IndexKeys = append(in.IndexKeys, goldenKey{ID: id})
		in.Rankings = append(in.Rankings, goldenRanking{IndexID: id, Chunk: r.IntN(1 << 31), Nodes: 1 + r.IntN(20)})
	}
	for range 50 {
		in.Homes = append(in.Homes, goldenHomes{World: 1 + r.IntN(40), Nodes: 1 + r.IntN(12)})
	}
	// Bounded ownership: even, uneven and very skewed chunk sizes, so that
	// the bound moves chunks and some chunks fit under no node's bound.
	for i := range 60 {
		counts := make([]int, r.IntN(80))
		for c := range counts {
			switch i % 3 {
			case 0:
				counts[c] = 100
			case 1:
				counts[c] = 50 + r.IntN(100)
			default:
				counts[c] = r.IntN(10) * r.IntN(10) * r.IntN(10)
			}
		}
		in.Balanced = append(in.Balanced, goldenBalanced{IndexID: fmt.Sprintf("%016x", r.Uint64()), Counts: counts, Nodes: 1 + r.IntN(9)})
	}
	for i, c := range randomAssignCases(300) {
		in.Assign = append(in.Assign, goldenAssign{Name: fmt.Sprintf("random-%d", i), IDs: c.ids, Owner: c.owner, Share: c.share, Nodes: c.nodes})
	}
	for i := range 40 {
		counts := make([]int, r.IntN(30))
		for c := range counts {
			if r.IntN(6) > 0 {
				counts[c] = r.IntN(10)
			}
		}
		in.Jobs = append(in.Jobs, goldenJob{
			Name: fmt.Sprintf("random-%d", i), IndexID: fmt.Sprintf("%016x", r.Uint64()),
			Nodes: 2 + r.IntN(4), Counts: counts, Seed: r.Uint64(), Epoch: r.Uint64N(50),
			Window: 1 + r.IntN(8), BatchSize: 1 + r.IntN(6), World: 1 + r.IntN(9),
			DropLast: r.IntN(3) == 0, Locality: r.IntN(4) > 0,
		})
	}
	for i := range 20 {
		given := make([]string, 1+r.IntN(12))
		for j := range given {
			given[j] = fmt.Sprintf("http://brand-%d.brand.ns%d.svc:8080", r.IntN(16), i%3)
		}
		in.Memberships = append(in.Memberships, goldenMembership{Given: given})
		in.Jobs = append(in.Jobs, goldenJob{
			Name: fmt.Sprintf("random-members-%d", i), IndexID: fmt.Sprintf("%016x", r.Uint64()),
			Members: []string{fmt.Sprintf("http://a%d:1", i), fmt.Sprintf("http://b%d:1", i), "http://c:1"}, Nodes: 3,
			Counts: []int{3, 4, 5, 6, 2, 1, 8, 3}, Seed: r.Uint64(), Epoch: r.Uint64N(50), Window: 1 + r.IntN(4),
			BatchSize: 1 + r.IntN(4), World: 1 + r.IntN(7), Locality: true,
		})
	}
	compareGolden(t, "python", runReference(t, in), computeGolden(t, in))
}
