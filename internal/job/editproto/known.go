package editproto

import (
	"sync"
	"time"
)

// Known is what a node knows of each named job's edits of one kind: E
// (the job's current version, or that it has none), and when the store
// was last asked, so that a book asks it again only after its refresh.
// Safe for concurrent use.
type Known[E any] struct {
	mu sync.Mutex
	m  map[jobKey]known[E]
}

type known[E any] struct {
	e    E
	read time.Time
}

// Get is what is known of job over dataset, and when the store was last
// asked.
func (k *Known[E]) Get(dataset, job string) (e E, read time.Time, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[jobKey{dataset, job}]
	return v.e, v.read, ok
}

// Set records e for job over dataset, as the store answered at read.
func (k *Known[E]) Set(dataset, job string, e E, read time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[jobKey]known[E]{}
	}
	k.m[jobKey{dataset, job}] = known[E]{e, read}
}
