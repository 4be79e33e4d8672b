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
// must be distinct and non-empty. It allocates exactly its nodes (one per
// distinct prefix, counted first) and 12 bytes a node while building.
func newByteTrie(keys []string, ids []int32) *byteTrie {
	order := make([]int32, len(keys))
	for i := range order {
		order[i] = int32(i)
	}
	sort.Slice(order, func(a, b int) bool { return keys[order[a]] < keys[order[b]] })
	nodes := 1 // the root, then each key's prefixes its predecessor lacks
	for i, k := range order {
		key, common := keys[k], 0
		if i > 0 {
			prev := keys[order[i-1]]
			for common < len(prev) && common < len(key) && prev[common] == key[common] {
				common++
			}
		}
		nodes += len(key) - common
	}
	t := &byteTrie{
		first:  make([]int32, nodes),
		count:  make([]int32, nodes),
		id:     make([]int32, nodes),
		labels: make([]byte, 0, nodes-1),
		next:   make([]int32, 0, nodes-1),
	}
	// Breadth first, so that each node's children are appended together;
	// node n stands for the keys order[lo[n]:hi[n]], which share its
	// depth[n] first bytes (no recursion: a key may be long).
	lo, hi, depth := make([]int32, nodes), make([]int32, nodes), make([]int32, nodes)
	hi[0] = int32(len(order))
	made := int32(1)
	for n := int32(0); n < made; n++ {
		t.id[n] = -1
		l, d := lo[n], int(depth[n])
		if l < hi[n] && len(keys[order[l]]) == d { // sorted: the key ending here is first
			t.id[n] = ids[order[l]]
			l++
		}
		t.first[n] = int32(len(t.labels))
		for i := l; i < hi[n]; {
			b := keys[order[i]][d]
			j := i + 1
			for j < hi[n] && keys[order[j]][d] == b {
				j++
			}
			t.labels = append(t.labels, b)
			t.next = append(t.next, made)
			lo[made], hi[made], depth[made] = i, j, int32(d+1)
			made++
			i = j
		}
		t.count[n] = int32(len(t.labels)) - t.first[n]
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

// longestPrefix returns the length and ID of the longest key that is a
// prefix of text, or 0 and -1.
func (t *byteTrie) longestPrefix(text []byte) (length int, id int32) {
	return t.longestPrefixOf(text, nil, 0)
}

// longestPrefixOf is longestPrefix among the keys whose ID has type typ
// in types (all keys if types is nil).
func (t *byteTrie) longestPrefixOf(text []byte, types []int8, typ int8) (length int, id int32) {
	id = -1
	node := int32(0)
	for i, b := range text {
		if node = t.child(node, b); node < 0 {
			break
		}
		if k := t.id[node]; k >= 0 && (types == nil || types[k] == typ) {
			length, id = i+1, k
		}
	}
	return length, id
}
