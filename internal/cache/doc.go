// Package cache is the parent of the chunk cache's rooms
// (docs/architecture.md, "The chunk cache"):
//
//	chunkcache  the byte-bounded cache of whole chunks: singleflight loads,
//	            pins, waiters admitted in order, a three-method Policy
//	usetable    when each chunk is next needed by the job streams a node
//	            serves (the use table), eviction by it, prefetch
//	evict       the indexed heap and far key that the server's eviction and
//	            the planner's simulation share
//	assembly    the grouping by which a read larger than the cache is pinned
//	            in parts, shared by the reader and the planner
//	disktier    whole, verified chunks on local disk below the cache
//	preload     loads no stream's order names (a batch's later parts, the S3
//	            face's read-ahead), bounded and dropped when full
//	gopcache    decoded keyframe groups of videos, held for the clips of a
//	            decode horizon that want them, by the next use the order
//	            names; the policy shared by the clip stage and the plan
package cache
