package sequences

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/brandgw/brand/internal/codec/ustar"
	"github.com/brandgw/brand/vision"
)

// VisionRequest is one vision batch's work (a token job with vision=):
// each sequence's key and its samples, read and checked against their
// layout already (vision.Reader.ReadSequence), and the writer of the
// job's members.
type VisionRequest struct {
	Writer  *vision.Writer
	Keys    []string
	Samples [][]vision.Sample
	// NoWait: a premade batch, which takes no memory it would wait for.
	NoWait bool
	// Skip writes a sequence whose sample's image does not decode past
	// its header (vision.PixelsError) again without that sample, named
	// in Output.Skipped, rather than fail the batch (the server's
	// --on-bad-image=skip).
	Skip bool
}

// A VisionSkip is a sample a vision batch's sequence was written
// without (VisionRequest.Skip): its sequence's index, its place in that
// sequence's samples as asked, and why.
type VisionSkip struct {
	Seq, Sample int
	Err         error
}

// PackVision writes a vision batch's sequences (vision.Writer: token
// IDs, positions, loss mask, image spans and sizes, each image resized)
// into one buffer of the stage's budget, sized before any pixel is
// decoded (vision.Writer.Size), each sequence on the stage's workers.
// Each image's decode takes its memory from the node's decodes before it
// decodes (Workers.Decode), as a transform job's images do. Errors:
// ErrTooLarge over the server's bound, the budget's (a batch's memory, an
// image's decode), a sample's image that does not decode or whose decode
// is larger than all the node has for decodes (vision.ErrBadImage,
// naming it). With req.Skip, such a sample is left out of its sequence
// instead — the sequence written again in its room without it, its later
// samples moved up and its pad longer, as if packed without it — and
// named in the skipped list returned (in sequence order).
func (s *Stage) PackVision(ctx context.Context, req VisionRequest) (*Output, error) {
	reserve := func(n int64) (func(), error) { return s.workers.Decode(ctx, n, req.NoWait) }
	k := &visionKind{req: &req, reserve: reserve, samples: slices.Clone(req.Samples), skipped: make([][]VisionSkip, len(req.Keys))}
	b, err := s.sized(req.Keys, s.visionHeader, k, func(total int64) error {
		return fmt.Errorf("%w: %d sequences of %d tokens and their images make %d bytes, over the server's --max-batch-bytes (%d)",
			ErrTooLarge, len(req.Keys), req.Writer.Seq, total, s.maxBytes)
	})
	if err != nil {
		return nil, err
	}
	out, err := s.write(ctx, b, req.NoWait)
	if err != nil {
		return nil, err
	}
	for i := range req.Keys {
		out.Tokens += int64(req.Writer.Seq)
		for _, smp := range k.samples[i] {
			out.NonPad += int64(smp.Tokens())
		}
	}
	s.figures.add(out, len(req.Keys), 0)
	out.Skipped = slices.Concat(k.skipped...)
	return out, nil
}

// visionKind is a vision batch as the batch writer's kind: each
// sequence's members as its vision.Writer makes them, each image's
// decode within reserve, less, with Skip, the samples whose pixels do
// not decode (samples and skipped: sequence i's, written by its worker
// alone).
type visionKind struct {
	req     *VisionRequest
	reserve vision.Reserve
	samples [][]vision.Sample
	skipped [][]VisionSkip
}

func (k *visionKind) size(i int) int64 { return k.req.Writer.Size(k.req.Keys[i], k.req.Samples[i]) }

// shrinks: a sequence written without a skipped sample is shorter than
// sized.
func (k *visionKind) shrinks() bool { return k.req.Skip }

func (k *visionKind) write(i int, w *ustar.Writer) error {
	asked := make([]int, len(k.samples[i])) // each sample's place as asked
	for j := range asked {
		asked[j] = j
	}
	for {
		err := k.req.Writer.Members(k.req.Keys[i], k.samples[i], func(name string, data []byte) error {
			room, err := w.Member(len(data), name)
			if err != nil {
				return err
			}
			copy(room, data)
			return nil
		}, k.reserve)
		var bad *vision.PixelsError
		if err == nil || !k.req.Skip || !errors.As(err, &bad) || bad.Sample >= len(asked) {
			return err
		}
		// Fewer samples need less room: the sequence is written again
		// at the start of its own.
		k.skipped[i] = append(k.skipped[i], VisionSkip{Seq: i, Sample: asked[bad.Sample], Err: err})
		k.samples[i] = slices.Delete(slices.Clone(k.samples[i]), bad.Sample, bad.Sample+1)
		asked = slices.Delete(asked, bad.Sample, bad.Sample+1)
		w.Reset()
	}
}

// TextSample is a piece of a text document in a vision mixture's
// sequence as a sample of text alone: tokens [from, from+n) of the
// document (its sample's bytes, of dtype; "" takes its own), its loss on
// every token, no image. A document not as indexed is ErrDocument, a
// token int32 cannot hold ErrTokenID.
func TextSample(sample []byte, dtype string, from, n int) (vision.Sample, error) {
	d, err := parseDoc(sample, dtype)
	if err != nil {
		return vision.Sample{}, err
	}
	if from < 0 || n < 0 || from+n > d.count {
		return vision.Sample{}, fmt.Errorf("%w: a piece of tokens [%d, %d) of a document of %d", ErrDocument, from, from+n, d.count)
	}
	b := make([]byte, 4*n)
	if bad := d.convert(b, from, n); bad >= 0 {
		return vision.Sample{}, fmt.Errorf("%w: token %d of a document is %s", ErrTokenID, from+bad, d.text(from+bad))
	}
	s := vision.Sample{IDs: make([]int32, n), Loss: make([]uint8, n)}
	for i := range n {
		s.IDs[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		s.Loss[i] = 1
	}
	return s, nil
}
