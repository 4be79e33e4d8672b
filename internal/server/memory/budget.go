package memory

import (
	"fmt"

	"github.com/dustin/go-humanize"
)

// Budget is a node's memory budget in shares by what each is for (see the package
// doc): bytes each.
type Budget struct {
	Cache   int64 `json:"cache"`
	Base    int64 `json:"base"`
	Copies  int64 `json:"copies"`
	Decodes int64 `json:"decodes"`
}

// Total is the budget: every share.
func (p Budget) Total() int64 { return p.Cache + p.Base + p.Copies + p.Decodes }

// DefaultBase is the base share: the runtime, the indexes (about 56 bytes
// a sample), connections' buffers, the transform workers' kept scratch
// and pooled buffers not in use.
const DefaultBase = 256 << 20

// minShared is the least a limit must leave copies and decodes.
const minShared = 32 << 20

// Fit returns the shares a limit of limit bytes holds, given the shares
// wanted. A limit of 0 is the shares' own total (`--memory-limit auto`).
// Otherwise the cache and the base come first, and copies and decodes
// share what is left: decodes are given what they want up to half of it,
// copies what they want of the rest, and decodes whatever copies leave.
// A limit that leaves them less than 32 MiB is an error naming the shares.
func Fit(limit int64, want Budget) (Budget, error) {
	if limit == 0 {
		return want, nil
	}
	shared := limit - want.Cache - want.Base
	if shared < minShared {
		return Budget{}, fmt.Errorf("a memory limit of %s leaves %s beside the cache (%s) and the rest of the process (%s); copies and decodes need at least %s",
			size(limit), size(max(shared, 0)), size(want.Cache), size(want.Base), size(minShared))
	}
	p := want
	floor := min(want.Decodes, shared/2)
	p.Copies = min(want.Copies, shared-floor)
	p.Decodes = shared - p.Copies
	return p, nil
}

func size(n int64) string { return humanize.IBytes(uint64(n)) }
