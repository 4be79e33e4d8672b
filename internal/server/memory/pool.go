package memory

import (
	"math/bits"
	"os"
	"sync"
)

// pool keeps buffers by size class, a power of two from 64 KiB up, so
// that a buffer fits any request of its class. A buffer smaller than the
// least class is not kept.
//
// A class keeps as many buffers as fill put in it on a list of its own
// (kept), which every get sees and the collector never empties; the rest
// go to a sync.Pool. A sync.Pool alone hid them: each P's private slot
// holds a buffer only that P's gets take, so a load on the other core
// missed a prefilled buffer and faulted in a fresh one (measured: 1,750
// pages of fresh read buffers a cold projected Parquet epoch, with no
// collection during it).
type pool struct {
	classes [maxClass + 1]sync.Pool
	kept    [maxClass + 1]keptList
}

// keptList is a class's kept buffers: up to most of them.
type keptList struct {
	mu   sync.Mutex
	bufs [][]byte
	most int
}

func (l *keptList) pop() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bufs) == 0 {
		return nil
	}
	b := l.bufs[len(l.bufs)-1]
	l.bufs[len(l.bufs)-1] = nil
	l.bufs = l.bufs[:len(l.bufs)-1]
	return b
}

// push keeps b if the list has room for it.
func (l *keptList) push(b []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bufs) >= l.most {
		return false
	}
	l.bufs = append(l.bufs, b)
	return true
}

const (
	minClassShift = 16 // 64 KiB
	maxClass      = 20 // up to 64 KiB << 20 = 64 GiB
)

// class is the size class of a buffer of n bytes: the smallest power of
// two of at least n, from 64 KiB.
func class(n int64) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return min(bits.Len64(uint64(n-1))-minClassShift, maxClass)
}

// get returns an empty buffer of capacity at least n: one of its class,
// else one of the two classes above (at most four times the room, held
// by the pool anyway, its pages touched: a fresh buffer costs more), else
// a new one. Two classes, not one: the buffers prefilled for a dataset
// served in place are of its largest chunk's read, and a job that reads
// some of its fields reads chunks a half or a quarter of that (measured:
// a projected Parquet epoch faulted in three fresh 8 MiB buffers, 5,300
// pages, beside prefilled ones of 32 MiB).
func (p *pool) get(n int64) []byte {
	c := class(n)
	for k := c; k <= min(c+2, maxClass); k++ {
		if b := p.kept[k].pop(); b != nil {
			return b[:0] // a kept buffer of class k ≥ c holds n (put)
		}
		if b, ok := p.classes[k].Get().(*[]byte); ok && int64(cap(*b)) >= n {
			return (*b)[:0]
		}
	}
	return make([]byte, 0, max(n, int64(1)<<(c+minClassShift)))
}

// take returns an empty buffer of capacity in [n, most]: a pooled one of
// n's class, else a new one of most. Unlike get it takes no buffer of a
// class above, nor one of n's class larger than most, so that the room
// reserved for it is its capacity (Account.Buffer).
func (p *pool) take(n, most int64) []byte {
	c := class(n)
	if b := p.kept[c].pop(); b != nil {
		if int64(cap(b)) >= n && int64(cap(b)) <= most {
			return b[:0]
		}
		p.put(b)
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		if int64(cap(*b)) >= n && int64(cap(*b)) <= most {
			return (*b)[:0]
		}
		p.classes[c].Put(b)
	}
	return make([]byte, 0, most)
}

// fill puts k new buffers of n bytes' class into the pool, every page
// written, and has the class keep k more.
func (p *pool) fill(n int64, k int) {
	page := os.Getpagesize()
	size := max(n, int64(1)<<(class(n)+minClassShift))
	l := &p.kept[class(size)]
	l.mu.Lock()
	l.most += k
	l.mu.Unlock()
	for range k {
		b := make([]byte, size)
		for i := 0; i < len(b); i += page {
			b[i] = 1 // a write, not a read: reads map the shared zero page
		}
		p.put(b)
	}
}

// put keeps b for a later get of its class.
func (p *pool) put(b []byte) {
	if cap(b) < 1<<minClassShift {
		return
	}
	c := class(int64(cap(b)))
	if int64(1)<<(c+minClassShift) > int64(cap(b)) {
		c-- // a buffer of a size between two classes serves the lower one
	}
	if c < 0 {
		return
	}
	b = b[:0]
	if p.kept[c].push(b) {
		return
	}
	p.classes[c].Put(&b)
}
