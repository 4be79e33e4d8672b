package cluster

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestIndexKey pins IndexKey to the published FNV-1a 64 test vectors, so
// that "FNV-1a of the index ID's bytes" in docs/shuffle.md is the whole
// story (no length prefix, no terminator).
func TestIndexKey(t *testing.T) {
	tests := []struct {
		id   string
		want uint64
	}{
		{"", 0xcbf29ce484222325}, // the offset basis
		{"a", 0xaf63dc4c8601ec8c},
		{"foobar", 0x85944171f73967e8},
	}
	for _, tt := range tests {
		if got := IndexKey(tt.id); got != tt.want {
			t.Errorf("IndexKey(%q) = %#x, want %#x", tt.id, got, tt.want)
		}
	}
}

// TestRanking: a chunk's ranking is a permutation of the nodes, sorted by
// score from the highest, and starts with its owner; Ranking appends.
func TestRanking(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		key, c, nodes := r.Uint64(), r.IntN(1<<20), 1+r.IntN(16)
		prefix := []int{-7, -8}
		got := Ranking(slices.Clone(prefix), key, c, Positions(nodes))
		if !slices.Equal(got[:2], prefix) {
			t.Fatalf("Ranking overwrote dst's prefix: %v", got)
		}
		rank := got[2:]
		if !slices.Equal(slices.Sorted(slices.Values(rank)), iota(nodes)) {
			t.Fatalf("Ranking(%#x, %d, %d) = %v, not a permutation of the nodes", key, c, nodes, rank)
		}
		if rank[0] != Owner(key, c, Positions(nodes)) {
			t.Fatalf("Ranking(%#x, %d, %d) = %v starts with %d; Owner is %d", key, c, nodes, rank, rank[0], Owner(key, c, Positions(nodes)))
		}
		for i := 1; i < nodes; i++ {
			if score(key, c, uint64(rank[i-1])) <= score(key, c, uint64(rank[i])) {
				t.Fatalf("Ranking(%#x, %d, %d) = %v: node %d does not score above node %d", key, c, nodes, rank, rank[i-1], rank[i])
			}
		}
	}
	if got := Ranking(nil, 1, 2, Positions(1)); !slices.Equal(got, []int{0}) {
		t.Errorf("Ranking over one node = %v", got)
	}
}

// TestOwnershipBalanced: each of N nodes owns C/N chunks up to the binomial
// noise, within 4.5 standard deviations.
func TestOwnershipBalanced(t *testing.T) {
	const chunks = 10000
	for _, nodes := range []int{2, 4, 16} {
		for _, id := range []string{"imagenet-train@v1", "c4-en@2024-05-01", ""} {
			count := make([]int, nodes)
			for c := range chunks {
				count[Owner(IndexKey(id), c, Positions(nodes))]++
			}
			p := 1 / float64(nodes)
			mean, sd := chunks*p, math.Sqrt(chunks*p*(1-p))
			for k, n := range count {
				if math.Abs(float64(n)-mean) > 4.5*sd {
					t.Errorf("index %q, %d nodes: node %d owns %d chunks, expected %.0f ± %.0f", id, nodes, k, n, mean, sd)
				}
			}
		}
	}
}

// TestAddNode: going from N to N+1 nodes moves only the chunks the new node
// now owns, about C/(N+1) of them; every other chunk keeps its owner.
func TestAddNode(t *testing.T) {
	const chunks = 10000
	key := IndexKey("add-node")
	for nodes := 1; nodes <= 16; nodes++ {
		moved := 0
		for c := range chunks {
			before, after := Owner(key, c, Positions(nodes)), Owner(key, c, Positions(nodes+1))
			if before == after {
				continue
			}
			if after != nodes {
				t.Fatalf("%d→%d nodes: chunk %d moved from node %d to old node %d", nodes, nodes+1, c, before, after)
			}
			moved++
		}
		p := 1 / float64(nodes+1)
		mean, sd := chunks*p, math.Sqrt(chunks*p*(1-p))
		if math.Abs(float64(moved)-mean) > 4.5*sd {
			t.Errorf("%d→%d nodes: %d chunks moved, expected %.0f ± %.0f", nodes, nodes+1, moved, mean, sd)
		}
	}
}

// TestFailover: with a node down, a chunk is read from the first node of
// its ranking that is up. Taking node x down moves only x's chunks, each to
// its ranking's second node; and the first live node of a ranking is the
// highest-scoring live node, so several failures compose the same way.
// Removing the last node from the list (shrinking N) is the same as taking
// it down.
func TestFailover(t *testing.T) {
	const chunks = 4000
	key := IndexKey("failover")
	r := rand.New(rand.NewPCG(3, 4))
	for _, nodes := range []int{2, 3, 4, 5, 8, 16} {
		for x := range nodes {
			for c := range chunks {
				rank := Ranking(nil, key, c, Positions(nodes))
				got := firstUp(rank, map[int]bool{x: true})
				want := rank[0]
				if rank[0] == x {
					want = rank[1]
				}
				if got != want {
					t.Fatalf("%d nodes, node %d down: chunk %d served by %d, want %d (ranking %v)", nodes, x, c, got, want, rank)
				}
				if x == nodes-1 {
					if shrunk := Owner(key, c, Positions(nodes-1)); shrunk != want {
						t.Fatalf("%d→%d nodes: chunk %d owned by %d, want %d (ranking %v)", nodes, nodes-1, c, shrunk, want, rank)
					}
				}
			}
		}
		// Random sets of failed nodes: the first live node is the best live
		// score.
		for range 200 {
			down := map[int]bool{}
			for k := range nodes - 1 {
				down[(k+r.IntN(nodes))%nodes] = r.IntN(3) == 0
			}
			c := r.IntN(1 << 30)
			got := firstUp(Ranking(nil, key, c, Positions(nodes)), down)
			best := -1
			for k := range nodes {
				if !down[k] && (best < 0 || score(key, c, uint64(k)) > score(key, c, uint64(best))) {
					best = k
				}
			}
			if got != best {
				t.Fatalf("%d nodes, down %v: chunk %d served by %d, want the best live node %d", nodes, down, c, got, best)
			}
		}
	}
}

// firstUp is the gateway's walk down a ranking: the first node not down,
// -1 if all are.
func firstUp(ranking []int, down map[int]bool) int {
	for _, k := range ranking {
		if !down[k] {
			return k
		}
	}
	return -1
}

// TestOwnerDependsOnIndex: two versions of a dataset place their chunks
// independently (about 1/N agree), so a new index version does not pile on
// the nodes of the old one.
func TestOwnerDependsOnIndex(t *testing.T) {
	const chunks, nodes = 10000, 4
	a, b := IndexKey("ds@v1"), IndexKey("ds@v2")
	same := 0
	for c := range chunks {
		if Owner(a, c, Positions(nodes)) == Owner(b, c, Positions(nodes)) {
			same++
		}
	}
	p := 1.0 / nodes
	if mean, sd := chunks*p, math.Sqrt(chunks*p*(1-p)); math.Abs(float64(same)-mean) > 4.5*sd {
		t.Errorf("%d of %d chunks have the same owner in both versions, expected %.0f ± %.0f", same, chunks, mean, sd)
	}
}

// TestBalancedKeepsRendezvousOwners: when no node's rendezvous load passes
// the bound, the bounded owners are the rendezvous owners; and no node
// ends above the bound except by one chunk that fit nowhere. (When some
// node passes it, chunks can move off other nodes too: overflow taken in
// by a node can leave no room for a later chunk of its own.)
func TestBalancedKeepsRendezvousOwners(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	within := 0
	for i := range 300 {
		nodes := 1 + r.IntN(8)
		counts := make([]int, r.IntN(200))
		total, largest := 0, 0
		for c := range counts {
			counts[c] = 1 + r.IntN(100)
			if i%4 == 0 {
				counts[c] = 50
			}
			total += counts[c]
			largest = max(largest, counts[c])
		}
		key := r.Uint64()
		limit := (17*total + 16*nodes - 1) / (16 * nodes)
		plain := make([]int, len(counts))
		for c := range plain {
			plain[c] = Owner(key, c, Positions(nodes))
		}
		bounded := BoundedOwners(key, counts, Positions(nodes))
		plainLoad, load := make([]int, nodes), make([]int, nodes)
		for c, n := range counts {
			plainLoad[plain[c]] += n
			load[bounded[c]] += n
		}
		if slices.Max(append(plainLoad, 0)) <= limit && !slices.Equal(bounded, plain) {
			t.Fatalf("%d nodes, counts %v: rendezvous loads %v are within the bound %d, yet the owners changed from %v to %v",
				nodes, counts, plainLoad, limit, plain, bounded)
		}
		if slices.Max(append(plainLoad, 0)) <= limit {
			within++
		}
		for k, l := range load {
			if l > limit+largest {
				t.Fatalf("%d nodes: node %d owns %d samples, bound %d", nodes, k, l, limit)
			}
		}
	}
	if within < 30 || within > 270 {
		t.Errorf("%d of 300 cases had every rendezvous load within the bound; the test needs both kinds", within)
	}
}

func iota(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
