package evict

import (
	"cmp"
	"container/heap"
	"math/rand/v2"
	"slices"
	"testing"
)

// model is the reference: the entries in a map, ordered by sorting.
type model map[int]entry

func (m model) order() []int {
	ids := make([]int, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b int) int {
		return cmp.Or(cmp.Compare(m[b].key, m[a].key), cmp.Compare(m[a].seq, m[b].seq))
	})
	return ids
}

// check compares h with m: length, membership, and the whole eviction
// order, walked twice to show the walk changes nothing.
func check(t *testing.T, h *Heap, m model, ids int) {
	t.Helper()
	if h.Len() != len(m) {
		t.Fatalf("Len() = %d, want %d", h.Len(), len(m))
	}
	for id := range ids {
		if _, ok := m[id]; h.Contains(id) != ok {
			t.Fatalf("Contains(%d) = %t, want %t", id, !ok, ok)
		}
	}
	want := m.order()
	for range 2 {
		if got := slices.Collect(h.Victims()); !slices.Equal(got, want) {
			t.Fatalf("Victims() = %v, want %v", got, want)
		}
	}
}

func TestHeapOrder(t *testing.T) {
	tests := []struct {
		name string
		ops  func(h *Heap)
		want []int // the Pop order
	}{
		{"by key, largest first", func(h *Heap) {
			h.Push(0, 5, 0)
			h.Push(1, 9, 0)
			h.Push(2, 1, 0)
		}, []int{1, 0, 2}},
		{"equal keys by seq, smallest first", func(h *Heap) {
			h.Push(0, 7, 3)
			h.Push(1, 7, 1)
			h.Push(2, 7, 2)
		}, []int{1, 2, 0}},
		{"Never first", func(h *Heap) {
			h.Push(0, Never-1, 0)
			h.Push(1, Never, 5)
			h.Push(2, 0, 0)
		}, []int{1, 0, 2}},
		{"Update moves an entry", func(h *Heap) {
			h.Push(0, 5, 0)
			h.Push(1, 9, 0)
			h.Update(0, 10, 1)
		}, []int{0, 1}},
		{"Update adds an absent ID", func(h *Heap) {
			h.Update(3, 1, 0)
			h.Update(1, 2, 0)
		}, []int{1, 3}},
		{"Remove", func(h *Heap) {
			h.Push(0, 5, 0)
			h.Push(1, 9, 0)
			h.Push(2, 7, 0)
			h.Remove(1)
		}, []int{2, 0}},
		{"Rekey keeps seqs", func(h *Heap) {
			h.Push(0, 1, 2)
			h.Push(1, 2, 1)
			h.Push(2, 3, 0)
			h.Rekey(func(id int) int64 { return int64(id % 2) })
		}, []int{1, 2, 0}},
		{"IDs beyond NewHeap's range", func(h *Heap) {
			h.Push(1000, 1, 0)
			h.Push(5, 2, 0)
		}, []int{5, 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHeap(4)
			tt.ops(h)
			if got := slices.Collect(h.Victims()); !slices.Equal(got, tt.want) {
				t.Errorf("Victims() = %v, want %v", got, tt.want)
			}
			var got []int
			for h.Len() > 0 {
				got = append(got, h.Pop())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Pop order %v, want %v", got, tt.want)
			}
			for _, id := range tt.want {
				if h.Contains(id) {
					t.Errorf("Contains(%d) after it was popped", id)
				}
			}
		})
	}
}

// TestHeapRandom runs random operations on a Heap and on the reference,
// comparing them after each.
func TestHeapRandom(t *testing.T) {
	const ids = 40
	for _, start := range []int{0, ids} { // the zero Heap grows; NewHeap does not need to
		r := rand.New(rand.NewPCG(1, uint64(start)))
		h := &Heap{}
		if start > 0 {
			h = NewHeap(start)
		}
		m := model{}
		for i := range 3000 {
			id := r.IntN(ids)
			key := int64(r.IntN(8)) // few keys: many ties for seq to break
			seq := uint64(i)        // distinct: equal entries have no order
			switch op := r.IntN(10); {
			case op < 3:
				if _, ok := m[id]; !ok {
					h.Push(id, key, seq)
					m[id] = entry{key: key, seq: seq}
				}
			case op < 5:
				h.Update(id, key, seq)
				m[id] = entry{key: key, seq: seq}
			case op < 7:
				_, ok := m[id]
				if got := h.Remove(id); got != ok {
					t.Fatalf("Remove(%d) = %t, want %t", id, got, ok)
				}
				delete(m, id)
			case op < 9:
				if len(m) > 0 {
					want := m.order()[0]
					if got := h.Pop(); got != want {
						t.Fatalf("Pop() = %d, want %d", got, want)
					}
					delete(m, want)
				}
			default:
				h.Rekey(func(id int) int64 { return int64((id * 7) % 5) })
				for id, e := range m {
					e.key = int64((id * 7) % 5)
					m[id] = e
				}
			}
			check(t, h, m, ids)
		}
	}
}

// TestVictimsStops: a walk stopped after k victims yields the first k and
// leaves the heap whole.
func TestVictimsStops(t *testing.T) {
	h := NewHeap(10)
	for id := range 10 {
		h.Push(id, int64(id), 0)
	}
	var got []int
	for id := range h.Victims() {
		got = append(got, id)
		if len(got) == 3 {
			break
		}
	}
	if !slices.Equal(got, []int{9, 8, 7}) || h.Len() != 10 {
		t.Errorf("first three victims %v, Len %d; want [9 8 7], 10", got, h.Len())
	}
}

func TestHeapPanics(t *testing.T) {
	tests := []struct {
		name string
		fn   func(h *Heap)
	}{
		{"Push of an ID in the heap", func(h *Heap) { h.Push(1, 0, 0); h.Push(1, 2, 0) }},
		{"Pop of an empty heap", func(h *Heap) { h.Pop() }},
		{"a negative ID", func(h *Heap) { h.Update(-1, 0, 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tt.fn(NewHeap(2))
		})
	}
}

func TestHeapAbsent(t *testing.T) {
	h := NewHeap(2)
	if h.Remove(1) || h.Remove(5) || h.Remove(-1) || h.Contains(5) || h.Contains(-1) {
		t.Error("an empty heap claims an ID")
	}
}

// stdHeap is an indexed heap on container/heap, as the planner kept one
// before this package: the reference for the order of entries equal in
// key and seq.
type stdHeap struct {
	entries []entry
	pos     map[int32]int
}

func (h *stdHeap) Len() int { return len(h.entries) }
func (h *stdHeap) Less(i, j int) bool {
	a, b := h.entries[i], h.entries[j]
	if a.key != b.key {
		return a.key > b.key
	}
	return a.seq < b.seq
}
func (h *stdHeap) Swap(i, j int) {
	h.entries[i], h.entries[j] = h.entries[j], h.entries[i]
	h.pos[h.entries[i].id], h.pos[h.entries[j].id] = i, j
}
func (h *stdHeap) Push(x any) {
	e := x.(entry)
	h.pos[e.id] = len(h.entries)
	h.entries = append(h.entries, e)
}
func (h *stdHeap) Pop() any {
	e := h.entries[len(h.entries)-1]
	h.entries = h.entries[:len(h.entries)-1]
	delete(h.pos, e.id)
	return e
}

// TestHeapTiesAsContainerHeap: with many entries equal in key and seq (as
// Belady's chunks never used again are), Pop returns them in the order a
// heap on container/heap does, so simulations replay as they did.
func TestHeapTiesAsContainerHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	h, ref := NewHeap(0), &stdHeap{pos: map[int32]int{}}
	for range 5000 {
		id := r.IntN(64)
		key := int64(r.IntN(3))
		switch op := r.IntN(8); {
		case op < 3:
			if !h.Contains(id) {
				h.Push(id, key, 0)
				heap.Push(ref, entry{key: key, id: int32(id)})
			}
		case op < 4:
			if h.Contains(id) {
				h.Update(id, key, 0)
				ref.entries[ref.pos[int32(id)]].key = key
				heap.Fix(ref, ref.pos[int32(id)])
			}
		case op < 5:
			if p, ok := ref.pos[int32(id)]; ok {
				heap.Remove(ref, p)
			}
			h.Remove(id)
		case op < 7:
			if ref.Len() > 0 {
				want := int(heap.Pop(ref).(entry).id)
				if got := h.Pop(); got != want {
					t.Fatalf("Pop() = %d, container/heap pops %d", got, want)
				}
			}
		default:
			h.Rekey(func(id int) int64 { return int64(id % 3) })
			for i := range ref.entries {
				ref.entries[i].key = int64(ref.entries[i].id % 3)
			}
			heap.Init(ref)
		}
	}
}
