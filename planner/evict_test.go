package planner

import "github.com/brandgw/brand/internal/cache/evict"

// never64 is the key of a chunk needed by nothing and weighing nothing.
const never64 = evict.Never
