package tokenize

import "sort"

// byteTrie finds the pieces that are prefixes of a text, byte by byte,
// as the reference's double-array tries do (its unigram lattice and its
// user-defined-symbol matcher). Built once from the model, read-only
// after, so safe for concurrent use.
//
// Each node's children are contiguous in labels/next, sorted by label;
// the root's are also in a 256-entry table, since nearly every byte
// starts some piece.
type byteTrie struct {
	first  []int32 // per node: index of its first child in labels/next
	count  []int32 // per node: its number of children
	id     []int32 // per node: the piece ending here, or -1
	labels []byte
	next   []int32
	root   [256]int32 // the root's child by byte, or -1
}

// newByteTrie builds the trie of keys, key i standing for ids[i]. Keys
// must be distinct and non-empty.
func newByteTrie(keys []string, ids []int32) *byteTrie {
	order := make([]int32, len(keys))
	for i := range order {
		order[i] = int32(i)
	}
	sort.Slice(order, func(a, b int) bool { return keys[order[a]] < keys[order[b]] })

	t := &byteTrie{}
	newNode := func() int32 {
		t.first = append(t.first, 0)
		t.count = append(t.count, 0)
		t.id = append(t.id, -1)
		return int32(len(t.id) - 1)
	}
	// Breadth first, so that each node's children are appended together;
	// a node stands for the keys order[lo:hi], which share its depth
	// bytes (no recursion: a key may be long).
	type span struct {
		node, lo, hi int32
		depth        int
	}
	queue := []span{{node: newNode(), lo: 0, hi: int32(len(order))}}
	for head := 0; head < len(queue); head++ {
		sp := queue[head]
		lo := sp.lo
		if lo < sp.hi && len(keys[order[lo]]) == sp.depth { // sorted: the key ending here is first
			t.id[sp.node] = ids[order[lo]]
			lo++
		}
		t.first[sp.node] = int32(len(t.labels))
		for i := lo; i < sp.hi; {
			b := keys[order[i]][sp.depth]
			j := i + 1
			for j < sp.hi && keys[order[j]][sp.depth] == b {
				j++
			}
			child := newNode()
			t.labels = append(t.labels, b)
			t.next = append(t.next, child)
			queue = append(queue, span{node: child, lo: i, hi: j, depth: sp.depth + 1})
			i = j
		}
		t.count[sp.node] = int32(len(t.labels)) - t.first[sp.node]
		queue[head] = span{} // let the queue's consumed part hold nothing
	}
	for i := range t.root {
		t.root[i] = -1
	}
	for k := t.first[0]; k < t.first[0]+t.count[0]; k++ {
		t.root[t.labels[k]] = t.next[k]
	}
	return t
}

// child returns node's child by b, or -1.
func (t *byteTrie) child(node int32, b byte) int32 {
	if node == 0 {
		return t.root[b]
	}
	lo, end := t.first[node], t.first[node]+t.count[node]
	hi := end
	for lo < hi { // the first label not below b
		mid := int32(uint32(lo+hi) >> 1)
		if t.labels[mid] < b {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < end && t.labels[lo] == b {
		return t.next[lo]
	}
	return -1
}

// longestPrefix returns the length of the longest key that is a prefix of
// text, or 0.
func (t *byteTrie) longestPrefix(text []byte) int {
	longest := 0
	node := int32(0)
	for i, b := range text {
		if node = t.child(node, b); node < 0 {
			break
		}
		if t.id[node] >= 0 {
			longest = i + 1
		}
	}
	return longest
}
