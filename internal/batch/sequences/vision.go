package sequences

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

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
}

// PackVision writes a vision batch's sequences (vision.Writer: token
// IDs, positions, loss mask, image spans and sizes, each image resized)
// into one buffer of the stage's budget, sized before any pixel is
// decoded (vision.Writer.Size), each sequence on the stage's workers.
// Errors: ErrTooLarge over the server's bound, the budget's, a sample's
// image that does not decode (vision.ErrBadImage, naming it).
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
	err = s.workers.Run(ctx, len(req.Keys), func(i int) {
		out := buf[at[i]:at[i+1]:at[i+1]]
		b := bytes.NewBuffer(out[:0])
		tw := tar.NewWriter(b)
		if errs[i] = req.Writer.Write(tw, req.Keys[i], req.Samples[i]); errs[i] == nil {
			errs[i] = tw.Flush()
		}
		if errs[i] == nil && (b.Len() != len(out) || len(out) > 0 && &b.Bytes()[0] != &out[0]) {
			errs[i] = fmt.Errorf("%w: %d bytes written where %d were sized", vision.ErrSequence, b.Len(), len(out))
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
	out := &Output{Parts: make(net.Buffers, len(req.Keys)), Bytes: total, release: release}
	for i := range req.Keys {
		out.Parts[i] = buf[at[i]:at[i+1]:at[i+1]]
		out.Tokens += int64(req.Writer.Seq)
		for _, smp := range req.Samples[i] {
			out.NonPad += int64(smp.Tokens())
		}
	}
	s.figures.add(out, len(req.Keys), 0)
	return out, nil
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
