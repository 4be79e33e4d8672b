package lance

import (
	"fmt"

	"github.com/brandgw/brand/format"
)

// ErrOverLimit marks a read refused because it would allocate more than
// the caller's memory limit: a manifest, a data file's metadata, a
// deletion file, a page's table or chunk, or values (a zstd value's
// declared length among them) larger than what the limit leaves. It
// wraps format.ErrInvalid: what Lance writes fits any sensible limit, and
// a file declaring terabytes is refused by it before anything is
// allocated.
var ErrOverLimit = fmt.Errorf("%w: over the memory limit", format.ErrInvalid)

// DefaultMemoryLimit is Options.MemoryLimit where it is 0.
const DefaultMemoryLimit = 1 << 30

// Options bound what a Dataset allocates.
type Options struct {
	// MemoryLimit is the most bytes one read may allocate: reading a
	// manifest, a data file's metadata or a deletion file, or a
	// column's values with Dataset.Column (its fragments together: the
	// bytes read from each page and the values decoded, each value's
	// offset and null flag with them). brand index passes its
	// --memory-limit. 0 is DefaultMemoryLimit.
	MemoryLimit int64
}

func (o Options) limit() int64 {
	if o.MemoryLimit <= 0 {
		return DefaultMemoryLimit
	}
	return o.MemoryLimit
}

// overLimit is the error of what names, n bytes, refused against limit.
func overLimit(what string, n uint64, limit int64) error {
	return fmt.Errorf("%w: %s: %d bytes, the limit %d", ErrOverLimit, what, n, limit)
}
