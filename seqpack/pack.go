package seqpack

import (
	"fmt"

	"github.com/brandgw/brand/internal/errkind"
)

// ErrInvalid reports packing parameters outside their allowed range: a
// sequence length outside [1, MaxSeq], an unknown mode, a negative token
// count, or counts whose total overflows. The wrapping error names the
// parameter and its range.
var ErrInvalid = errkind.New(errkind.Invalid, "pack: invalid parameters")

// MaxSeq is the longest sequence, in tokens: 2^20. It bounds a
// sequence's members (two int32 arrays of seq) and the packer's scratch
// (an int32 and a bit per possible room).
const MaxSeq = 1 << 20

// A Mode is how documents become sequences (docs/shuffle.md §12).
type Mode uint8

const (
	// BestFit packs each shuffle window's documents on their own: a
	// document of seq tokens or more is cut into whole sequences of seq
	// and a remainder, and the remainders and shorter documents are
	// packed best-fit-decreasing, so that no document shorter than seq is
	// ever cut; the rest of a sequence is pad.
	BestFit Mode = iota
	// Concat concatenates the epoch's documents, each followed by one EOS
	// token, and cuts the stream every seq tokens: no pad but in the
	// epoch's last sequence.
	Concat
)

// String returns the mode's name as a job writes it: "bestfit" or
// "concat".
func (m Mode) String() string {
	switch m {
	case BestFit:
		return "bestfit"
	case Concat:
		return "concat"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode returns the mode a job names: "bestfit" or "concat". Anything
// else wraps ErrInvalid.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "bestfit":
		return BestFit, nil
	case "concat":
		return Concat, nil
	}
	return 0, fmt.Errorf("%w: pack %q; must be bestfit or concat", ErrInvalid, s)
}

// Spec is what a job says about packing: the sequence length and the
// mode. With the epoch's document order, the documents' token counts,
// the seed and the epoch it fixes every sequence.
type Spec struct {
	Seq  int  // tokens per sequence, in [1, MaxSeq]
	Mode Mode // BestFit or Concat
}

// Validate reports whether s is usable, as an error wrapping ErrInvalid
// that names the first offending parameter and its range.
func (s Spec) Validate() error {
	if s.Seq < 1 || s.Seq > MaxSeq {
		return fmt.Errorf("%w: seq %d; must be 1..%d", ErrInvalid, s.Seq, MaxSeq)
	}
	if s.Mode != BestFit && s.Mode != Concat {
		return fmt.Errorf("%w: %v; must be bestfit or concat", ErrInvalid, s.Mode)
	}
	return nil
}

// A Piece is a run of one document's tokens in a sequence: tokens
// [Offset, Offset+Len) of document Doc. In Concat a document is followed
// by its EOS token, which counts as the token after its last (offset the
// document's length): a piece with EOS set ends with it, so its document
// tokens are [Offset, Offset+Len-1). Len is at least 1.
type Piece struct {
	Doc    int  // the document: its sample ID in the order
	Offset int  // its first token in the document
	Len    int  // tokens, the EOS included
	EOS    bool // Concat: the piece's last token is the document's EOS
}

// A Sequence is seq tokens: its pieces, in order, then Pad pad tokens.
// The pieces' lengths and Pad add up to seq.
type Sequence struct {
	Pieces []Piece
	Pad    int
}

// AppendPositions appends s's position_ids to dst: 0, 1, … for each
// piece, restarting at 0 at each, then 0 … Pad-1 for the pad, so that a
// trainer's cu_seqlens are the positions where the ids are 0, and the
// end.
func (s Sequence) AppendPositions(dst []int32) []int32 {
	for _, p := range s.Pieces {
		for i := range p.Len {
			dst = append(dst, int32(i))
		}
	}
	for i := range s.Pad {
		dst = append(dst, int32(i))
	}
	return dst
}

// A DocumentOrder is an epoch's document order, window by window: the
// document IDs of window w in epoch order. *shuffle.Epoch and
// *importance.Epoch are DocumentOrders; so is a gateway's cache of their
// windows. Window must be a
// pure function of w, and safe for concurrent use if the Packing is used
// concurrently. A Packing does not modify the slices Window returns.
type DocumentOrder interface {
	NumWindows() int
	Window(w int) []int
}

// Tokens returns a document's token count, at least 0: a pure function,
// safe for concurrent use if the Packing is used concurrently.
type Tokens func(doc int) int
