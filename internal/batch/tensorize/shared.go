package tensorize

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/transform"
)

// The stage's workers and memory budget, shared with the pack stage
// (internal/batch/sequences), which writes token jobs' sequences beside the
// images this stage transforms: one pool bounds the CPU of both, and one
// rule the memory of every image decoded on the node (Decode).

// Run calls f(i) for i in [0, n) on the stage's workers and returns once
// every call has returned; ErrClosed if the stage closed first, ctx's
// error if ctx ended.
func (s *Stage) Run(ctx context.Context, n int, f func(i int)) error {
	return s.pool.run(ctx, Place{}, n, func(i int, _ *transform.Scratch) { f(i) })
}

// Buffer takes n bytes of the stage's budget (Config.Buffers): at once if
// noWait (ErrBusy if it has no room now), else waiting.
func (s *Stage) Buffer(ctx context.Context, n int64, noWait bool) ([]byte, func(), error) {
	return s.buffer(ctx, n, noWait)
}

// Decode takes n bytes of the node's decodes for an image the pack stage
// decodes (a vision sequence's), by the rule this stage's own images
// follow (Apply): at once if noWait (ErrBusy if there is no room now),
// else waiting within the budget's bound (chunkcache.ErrBusy past it);
// more than all of the decodes is transform.ErrTooLarge, before anything
// is reserved.
func (s *Stage) Decode(ctx context.Context, n int64, noWait bool) (func(), error) {
	if size := s.decodes.Size(); n > size {
		return nil, overDecodes("vision", n, size)
	}
	return s.reserve(noWait)(ctx, n)
}

// overDecodes is pipeline's image whose decode takes work bytes, more
// than this node's decodes (size) hold: a bad image here, whatever room
// is made.
func overDecodes(pipeline string, work, size int64) error {
	return fmt.Errorf("%w: pipeline %q: decoding it takes %d bytes, more than this node's memory for decodes (%d): "+
		"a larger --memory-limit, or a lower --max-image-pixels, bounds it", transform.ErrTooLarge, pipeline, work, size)
}
