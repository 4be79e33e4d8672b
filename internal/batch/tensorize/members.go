package tensorize

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"

	"github.com/brandgw/brand/internal/codec/ustar"
	"github.com/brandgw/brand/transform"
)

// block is a tar block: headers and data are padded to multiples of it.
const block = 512

// piece is one run of a sample's output: bytes of the sample passed
// through as they are, or an image member rewritten as its tensor.
type piece struct {
	// from, to are the sample's bytes passed through (header blocks,
	// data, padding), when image is false.
	from, to int
	image    bool
	// For an image: the member's name and tar header, its tensor member's
	// header blocks, its bytes in the sample, and the .npy's length.
	name        string
	tar         *tar.Header
	header      []byte
	data0, data int
	npy         int
	work        int64 // the decode's working memory (transform.Footprint.Work)
}

// size is the piece's output length.
func (p piece) size() int {
	if !p.image {
		return p.to - p.from
	}
	return len(p.header) + p.npy + pad(p.npy)
}

func pad(n int) int { return (block - n%block) % block }

// layout is one sample's output, planned before any pixel is decoded.
type layout struct {
	pieces []piece
	size   int
}

// images is how many image members the sample has.
func (l layout) images() int {
	n := 0
	for _, p := range l.pieces {
		if p.image {
			n++
		}
	}
	return n
}

// errMembers marks a sample whose bytes are not the tar members an index
// promised: they passed their CRC32C, so the sample was packed so (brand
// index over foreign shards). It wraps transform.ErrDecode: the sample
// cannot be transformed, and is treated as a bad image.
var errMembers = fmt.Errorf("%w: the sample's tar members", transform.ErrDecode)

// counter counts the bytes read through it: where archive/tar is in the
// sample, since it reads headers block by block and keeps nothing ahead.
type counter struct {
	r *bytes.Reader
	n int
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// plan lays out sample data's output under pipeline p with key: each
// regular file whose name is an image's (transform.OutputName) becomes a
// .npy member of the tensor's size, with the member's header fields but
// its name and size; everything else — other members, a member already
// a tensor (a sample a peer transformed), padding — passes through as
// it is. The tar headers are read by archive/tar. A failure names the
// member and wraps transform.ErrDecode or transform.ErrTooLarge (the
// image cannot be transformed), or ErrTooLarge: a tensor over maxBytes,
// which no call can hold, is refused before its tar header is written
// (a good image whose tensor is too large is not a bad image). An image
// whose decode needs more memory than maxWork, all a node has for
// decodes, is transform.ErrTooLarge: this node cannot decode it.
func plan(p *transform.Pipeline, data []byte, key transform.Key, maxBytes, maxWork int64) (layout, string, error) {
	c := &counter{r: bytes.NewReader(data)}
	tr := tar.NewReader(c)
	var l layout
	through := 0 // start of the bytes not yet placed in a piece
	prevEnd := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return l, "", fmt.Errorf("%w: %w", errMembers, err)
		}
		start, dataStart := prevEnd, c.n
		end := dataStart + int(hdr.Size)
		if hdr.Typeflag != tar.TypeReg {
			// Another kind of member (a directory, a link, a sparse file)
			// passes through; its data, if any, is read to find its end.
			if _, err := io.Copy(io.Discard, tr); err != nil {
				return l, hdr.Name, fmt.Errorf("%w: member %q: %w", errMembers, hdr.Name, err)
			}
			end = c.n
		}
		if end > len(data) {
			return l, hdr.Name, fmt.Errorf("%w: member %q ends at byte %d of %d", errMembers, hdr.Name, end, len(data))
		}
		prevEnd = min(end+pad(end), len(data))
		out, isImage := transform.OutputName(hdr.Name)
		if !isImage || hdr.Typeflag != tar.TypeReg {
			continue
		}
		img := data[dataStart:end]
		fp, err := p.Footprint(img, key)
		if err != nil {
			return l, hdr.Name, err
		}
		n := fp.Out
		if int64(n) > maxBytes {
			return l, hdr.Name, fmt.Errorf("%w: pipeline %q makes a tensor of %d bytes of it, over the server's --max-batch-bytes (%d)",
				ErrTooLarge, p.Name(), n, maxBytes)
		}
		if fp.Work > maxWork {
			return l, hdr.Name, overDecodes(p.Name(), fp.Work, maxWork)
		}
		h, err := tensorHeader(hdr, out, n)
		if err != nil {
			return l, hdr.Name, fmt.Errorf("%w: member %q: %w", errMembers, hdr.Name, err)
		}
		if start > through {
			l.add(piece{from: through, to: start})
		}
		l.add(piece{image: true, name: hdr.Name, tar: hdr, header: h, data0: dataStart, data: end, npy: n, work: fp.Work})
		through = prevEnd
	}
	if through < len(data) {
		l.add(piece{from: through, to: len(data)})
	}
	return l, "", nil
}

func (l *layout) add(p piece) {
	l.pieces = append(l.pieces, p)
	l.size += p.size()
}

// tensorHeader is the header blocks of an image member's tensor: the
// image's header with the tensor's name and size. Every other field
// (mode, owner, time, format) is kept, so the same image gives the same
// header on every node; but a size the image's format cannot hold (USTAR
// holds under 8 GiB) is written in the format archive/tar picks for it
// (PAX).
func tensorHeader(img *tar.Header, name string, size int) ([]byte, error) {
	h := *img
	h.Name, h.Size = name, int64(size)
	if h.PAXRecords != nil {
		h.PAXRecords = maps.Clone(h.PAXRecords)
		delete(h.PAXRecords, "path")
		delete(h.PAXRecords, "size")
	}
	b, err := ustar.AppendTarHeader(nil, &h)
	if err != nil && h.Format != tar.FormatUnknown {
		h.Format = tar.FormatUnknown
		b, err = ustar.AppendTarHeader(nil, &h)
	}
	// The header alone: the data and padding are written by the caller,
	// and no end-of-archive belongs in a sample.
	return b, err
}

// write writes sample data's output as l lays it out into out (empty,
// with capacity l.size), each image's member written by images (the
// pipeline's tensor, or its cut for the GPU) with key in the worker's
// scratch, each within its working memory reserved (reserve) while it
// decodes. It returns the output; a failure names the member.
func write(ctx context.Context, out []byte, l layout, data []byte, images imageWriter, key transform.Key, sc *transform.Scratch,
	meter *transform.Meter, reserve func(context.Context, int64) (func(), error)) ([]byte, string, error) {
	base := out[:0]
	for _, pc := range l.pieces {
		if !pc.image {
			out = append(out, data[pc.from:pc.to]...)
			continue
		}
		release, err := reserve(ctx, pc.work)
		if err != nil {
			return base, pc.name, err
		}
		var res transform.Result
		out, res, err = images.write(out, pc, data[pc.data0:pc.data], key, sc)
		release()
		meter.Add(res, err)
		if err != nil {
			return base, pc.name, err
		}
	}
	return out, "", nil
}

// An imageWriter appends an image member's output, at most pc.size()
// bytes (the room plan laid out for it, the tensor's), to out, whose
// capacity holds them: tensors or cuts, chosen once a call by
// imagesOf. On error out is returned as it came.
type imageWriter interface {
	write(out []byte, pc piece, image []byte, key transform.Key, sc *transform.Scratch) ([]byte, transform.Result, error)
}

// imagesOf is the writer of pipeline p's image members.
func imagesOf(p *transform.Pipeline) imageWriter {
	if p.CutsForGPU() {
		return cuts{tensors{p}}
	}
	return tensors{p}
}

// tensors writes an image as its tensor, the .npy member plan sized.
type tensors struct{ p *transform.Pipeline }

func (t tensors) write(out []byte, pc piece, image []byte, key transform.Key, sc *transform.Scratch) ([]byte, transform.Result, error) {
	at := len(out)
	out = append(out, pc.header...)
	res, err := t.p.Apply(out, image, key, sc)
	if err != nil {
		return out[:at], res, err
	}
	if len(res.Out) != len(out)+pc.npy || cap(res.Out) != cap(out) {
		// Size and Apply disagree: a bug, never a bad image.
		return out[:at], res, fmt.Errorf("tensors: member %q: the pipeline wrote %d bytes, its size said %d", pc.name, len(res.Out)-len(out), pc.npy)
	}
	return append(res.Out, zeros[:pad(pc.npy)]...), res, nil
}

var zeros [block]byte
