package sequences

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"

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
// Errors: ErrTooLarge over the server's bound, the budget's, a sample's
// image that does not decode (vision.ErrBadImage, naming it). With
// req.Skip, a sample whose image's pixels do not decode is left out of
// its sequence instead — the sequence written again in its room without
// it, its later samples moved up and its pad longer, as if packed
// without it — and named in the skipped list returned (in sequence
// order).
func (s *Stage) PackVision(ctx context.Context, req VisionRequest) (*Output, error) {
	at := make([]int64, len(req.Keys)+1)
	for i, key := range req.Keys {
		at[i+1] = at[i] + req.Writer.Size(key, req.Samples[i])
	}
	total := at[len(req.Keys)]
	if s.maxBytes > 0 && total > s.maxBytes {
		return nil, fmt.Errorf("%w: %d sequences of %d tokens and their images make %d bytes, over the server's --max-batch-bytes (%d)",
			ErrTooLarge, len(req.Keys), req.Writer.Seq, total, s.maxBytes)
	}
	buf, release, err := s.workers.Buffer(ctx, total, req.NoWait)
	if err != nil {
		return nil, err
	}
	buf = buf[:total]
	errs := make([]error, len(req.Keys))
	parts := make([][]byte, len(req.Keys))
	samples := slices.Clone(req.Samples) // a sequence's, less those skipped
	skipped := make([][]VisionSkip, len(req.Keys))
	err = s.workers.Run(ctx, len(req.Keys), func(i int) {
		room := buf[at[i]:at[i+1]:at[i+1]]
		asked := make([]int, len(samples[i])) // each sample's place as asked
		for j := range asked {
			asked[j] = j
		}
		for {
			parts[i], errs[i] = writeSequence(room, req.Writer, req.Keys[i], samples[i])
			var bad *vision.PixelsError
			if errs[i] == nil || !req.Skip || !errors.As(errs[i], &bad) || bad.Sample >= len(asked) {
				break
			}
			// Fewer samples need less room: the sequence is written
			// again at the start of its own.
			skipped[i] = append(skipped[i], VisionSkip{Seq: i, Sample: asked[bad.Sample], Err: errs[i]})
			samples[i] = slices.Delete(slices.Clone(samples[i]), bad.Sample, bad.Sample+1)
			asked = slices.Delete(asked, bad.Sample, bad.Sample+1)
		}
		if errs[i] != nil {
			errs[i] = fmt.Errorf("%w (sequence %s)", errs[i], req.Keys[i])
		}
	})
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		release()
		return nil, err
	}
	out := &Output{Parts: make(net.Buffers, len(req.Keys)), release: release}
	for i := range req.Keys {
		out.Parts[i] = parts[i]
		out.Bytes += int64(len(parts[i]))
		out.Tokens += int64(req.Writer.Seq)
		for _, smp := range samples[i] {
			out.NonPad += int64(smp.Tokens())
		}
	}
	s.figures.add(out, len(req.Keys), 0)
	out.Skipped = slices.Concat(skipped...)
	return out, nil
}

// writeSequence writes sequence key of samples into room, the bytes
// sized for it (vision.Writer.Size) or for more samples: the bytes
// written, exactly the size of these samples and never past room.
func writeSequence(room []byte, w *vision.Writer, key string, samples []vision.Sample) ([]byte, error) {
	size := w.Size(key, samples)
	if size > int64(len(room)) {
		return nil, fmt.Errorf("%w: %d bytes sized where %d were given", vision.ErrSequence, size, len(room))
	}
	b := bytes.NewBuffer(room[:0])
	tw := tar.NewWriter(b)
	err := w.Write(tw, key, samples)
	if err == nil {
		err = tw.Flush()
	}
	if err != nil {
		return nil, err
	}
	if int64(b.Len()) != size || size > 0 && &b.Bytes()[0] != &room[0] {
		return nil, fmt.Errorf("%w: %d bytes written where %d were sized", vision.ErrSequence, b.Len(), size)
	}
	return room[:size:size], nil
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
