package sequences

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/brandgw/brand/internal/codec/ustar"
	"github.com/brandgw/brand/internal/errkind"
)

// errSized is a sequence whose members did not fill the bytes its kind
// sized for it: the kind's size and its write disagree, a bug.
var errSized = errkind.New(errkind.Internal, "sequences: a sequence's bytes not as sized")

// A kind is a kind of batch — token sequences (Pack), vision sequences
// (PackVision), whatever comes next — as the batch writer takes it: each
// sequence's bytes in the tar, known before any is written, and its
// members. The rest (the stage's bound, the copy budget, the workers, the
// tar itself) is the batch writer's, the same for every kind.
type kind interface {
	// size is sequence i's bytes: its members' header blocks, data and
	// padding.
	size(i int) int64
	// write writes sequence i's members through w, which holds exactly
	// size(i) bytes: it fills them, or, for a kind that shrinks, as many
	// as it wrote (a sequence written without a sample it skipped).
	write(i int, w *ustar.Writer) error
}

// A shrinker is a kind whose sequences may be written shorter than
// sized (vision with --on-bad-image=skip).
type shrinker interface{ shrinks() bool }

// A batch is a call's sequences sized and held to the stage's bound, not
// yet written.
type batch struct {
	keys   []string
	header *ustar.Template // every member's header
	kind   kind
	at     []int64 // sequence i is [at[i], at[i+1]); the batch's bytes last
}

// sized sizes a batch of kind k's sequences keyed keys, whose members'
// headers are header's: each sequence's bytes, summed before any is
// written. A batch over the stage's bound is tooLarge(its bytes), an
// ErrTooLarge that says in the kind's words what made them.
func (s *Stage) sized(keys []string, header *ustar.Template, k kind, tooLarge func(total int64) error) (*batch, error) {
	at := make([]int64, len(keys)+1)
	for i := range keys {
		at[i+1] = at[i] + k.size(i)
	}
	if total := at[len(keys)]; s.maxBytes > 0 && total > s.maxBytes {
		return nil, tooLarge(total)
	}
	return &batch{keys: keys, header: header, kind: k, at: at}, nil
}

// write writes b into one buffer of the stage's copy budget (noWait: a
// premade batch, which takes none it would wait for), each sequence on
// the stage's workers into its place, through a ustar.Writer that must
// fill it. The output's figures are the caller's. On error nothing is
// held, and a sequence's error names it.
func (s *Stage) write(ctx context.Context, b *batch, noWait bool) (*Output, error) {
	n := len(b.keys)
	total := b.at[n]
	buf, release, err := s.workers.Buffer(ctx, total, noWait)
	if err != nil {
		return nil, err
	}
	buf = buf[:total]
	errs := make([]error, n)
	written := make([]int, n)
	sk, ok := b.kind.(shrinker)
	shrinks := ok && sk.shrinks()
	err = s.workers.Run(ctx, n, func(i int) {
		room := buf[b.at[i]:b.at[i+1]:b.at[i+1]]
		w := ustar.NewWriter(room, b.header)
		errs[i] = b.kind.write(i, w)
		written[i] = w.Len()
		if errs[i] == nil && w.Len() != len(room) && !(shrinks && w.Len() < len(room)) {
			errs[i] = fmt.Errorf("%w: %d bytes written where %d were sized", errSized, w.Len(), len(room))
		}
		if errs[i] != nil {
			errs[i] = fmt.Errorf("%w (sequence %s)", errs[i], b.keys[i])
		}
	})
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		release()
		return nil, err
	}
	out := &Output{Parts: make(net.Buffers, n), release: release}
	for i := range n {
		end := b.at[i] + int64(written[i])
		out.Parts[i] = buf[b.at[i]:end:end]
		out.Bytes += int64(written[i])
	}
	return out, nil
}
