package chunkcache

import (
	"iter"
	"math"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Policy orders resident, evictable chunks for eviction. The cache calls it
// with its lock held, so implementations need no locking of their own and
// must not call back into the cache.
type Policy interface {
	// Touch records that k is resident and was just used (a hit or a load).
	Touch(k Key)
	// Remove forgets k: it was evicted or pinned.
	Remove(k Key)
	// Victims yields the keys it tracks, the one to evict first first.
	Victims() iter.Seq[Key]
}

// LRU evicts the least recently used chunk. It keeps the recency order in a
// golang-lru simplelru list sized so that it never evicts by itself: the
// cache, not the list, decides what leaves, because only the cache knows
// byte sizes and pins.
type LRU struct {
	list *simplelru.LRU[Key, struct{}]
}

// NewLRU returns an empty LRU policy.
func NewLRU() *LRU {
	l, err := simplelru.NewLRU[Key, struct{}](math.MaxInt, nil)
	if err != nil { // only for a non-positive size
		panic(err)
	}
	return &LRU{list: l}
}

// Touch implements Policy.
func (p *LRU) Touch(k Key) { p.list.Add(k, struct{}{}) }

// Remove implements Policy.
func (p *LRU) Remove(k Key) { p.list.Remove(k) }

// Victims implements Policy: oldest first.
func (p *LRU) Victims() iter.Seq[Key] {
	return func(yield func(Key) bool) {
		for _, k := range p.list.Keys() {
			if !yield(k) {
				return
			}
		}
	}
}
