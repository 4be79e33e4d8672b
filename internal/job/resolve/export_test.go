package resolve

import "github.com/brandgw/brand/internal/job/chain"

// What the black-box tests read through: those that resolve jobs with
// the node's kinds of batch (internal/batch/units, which imports this
// package) are of package resolve_test.

// Chains is the book of the jobs' chains r reads.
func Chains(r *Resolver) *chain.Book { return r.chains }
