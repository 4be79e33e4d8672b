package tensorize

import (
	"context"

	"github.com/brandgw/brand/transform"
)

// The stage's workers and memory budget, shared with the pack stage
// (internal/batch/sequences), which writes token jobs' sequences beside the
// images this stage transforms: one pool bounds the CPU of both.

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
