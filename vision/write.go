package vision

import (
	"archive/tar"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/internal/codec/ustar"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/transform"
)

// ErrSequence marks samples that do not make the sequence their layout
// said: read again, they are not the tokens or images the items counted
// (the dataset changed under the job, or another rule read them).
var ErrSequence = errkind.New(errkind.Internal, "vision: samples do not make their sequence")

// A Writer writes vision sequences as tar members. It is immutable and
// safe for concurrent use.
type Writer struct {
	Seq int
	// Pad is the ID of the pad tokens after the samples (the job's pad=).
	Pad int32
	// Images are the options of the resampling: the decoder and the pixel
	// bound (transform.Options).
	Images transform.Options
}

// Reserve takes the memory an image's decode holds while it runs — its
// working memory (transform.Footprint.Work) and the tensor it makes —
// before a pixel is decoded, and returns what gives it back: a server's
// decodes share (memory.Manager.Decodes, through the pack stage), which
// waits within its bound or fails, and refuses a decode larger than all
// of it with an error wrapping transform.ErrTooLarge. nil reserves
// nothing (a tool's writer, a test's).
type Reserve func(n int64) (release func(), err error)

// Members writes sequence key, made of samples (the sequence's, read by
// a Reader, in its order), as its members, each given to put in order
// with its name and data:
//
//	KEY.input_ids.npy     int32 [seq]: the samples' IDs, then Pad
//	KEY.position_ids.npy  int32 [seq]: 0, 1, … restarting at each sample; 0 … pad-1 over the pad
//	KEY.loss_mask.npy     uint8 [seq]: 1 on text tokens, 0 on vision tokens and pad
//	KEY.image_spans.npy   int32 [n, 2]: each image's placeholders in the sequence, (start, length)
//	KEY.image_sizes.npy   int32 [n, 2]: each image's (height, width) as resized
//	KEY.image.K.npy       uint8 [3, h, w]: image K, resized by transform's exact resampler
//
// n is the sequence's images, in the order of their spans. Each image
// reserves its decode's memory (reserve) from its header, before its
// pixels are decoded, and gives it back once resized: an error of
// reserve's fails the write naming the member, and one wrapping
// transform.ErrTooLarge (no room would ever do) is a bad image. An image
// whose pixels do not decode, or that no room would hold, fails the write
// (ErrBadImage, as a *PixelsError naming its sample): its tokens are
// already laid out, so it is never left out of its sequence by Members,
// only written anew without its whole sample by a caller that skips bad
// samples. data is put's to copy before it returns.
func (wr *Writer) Members(key string, samples []Sample, put func(name string, data []byte) error, reserve Reserve) error {
	seq := wr.Seq
	ids := make([]int32, 0, seq)
	pos := make([]int32, 0, seq)
	loss := make([]uint8, 0, seq)
	var spans, sizes []int32
	var images []Image
	var owner []int // each image's sample
	for i, s := range samples {
		if len(s.IDs) != len(s.Loss) {
			return fmt.Errorf("%w: a sample of %d IDs and %d loss flags", ErrSequence, len(s.IDs), len(s.Loss))
		}
		at := len(ids)
		ids = append(ids, s.IDs...)
		loss = append(loss, s.Loss...)
		for i := range s.IDs {
			pos = append(pos, int32(i))
		}
		for _, im := range s.Images {
			spans = append(spans, int32(at+im.Span.Start), int32(im.Span.Len))
			sizes = append(sizes, int32(im.OutH), int32(im.OutW))
			images = append(images, im)
			owner = append(owner, i)
		}
	}
	if len(ids) > seq {
		return fmt.Errorf("%w: %d tokens, more than seq %d", ErrSequence, len(ids), seq)
	}
	for i := range seq - len(ids) {
		ids = append(ids, wr.Pad)
		pos = append(pos, int32(i))
		loss = append(loss, 0)
	}
	n := int64(len(images))
	for _, m := range []struct {
		ext, descr string
		shape      []int64
		data       []byte
	}{
		{".input_ids.npy", "<i4", []int64{int64(seq)}, int32s(ids)},
		{".position_ids.npy", "<i4", []int64{int64(seq)}, int32s(pos)},
		{".loss_mask.npy", "|u1", []int64{int64(seq)}, loss},
		{".image_spans.npy", "<i4", []int64{n, 2}, int32s(spans)},
		{".image_sizes.npy", "<i4", []int64{n, 2}, int32s(sizes)},
	} {
		b, err := npy.AppendHeader(nil, m.descr, m.shape)
		if err != nil {
			return err
		}
		if err := put(key+m.ext, append(b, m.data...)); err != nil {
			return err
		}
	}
	var sc transform.Scratch
	var out []byte
	for k, im := range images {
		p, err := resizer(im.OutW, im.OutH, wr.Images)
		if err != nil {
			return err
		}
		fp, err := p.Footprint(im.Data, transform.Key{})
		if err != nil {
			return fmt.Errorf("%w: member %s: %w", ErrBadImage, im.Member, err)
		}
		if fp.Out > cap(out) {
			out = nil // a new tensor's buffer; the last one is garbage
		}
		// Held while it decodes: its working memory, and the buffer its
		// tensor is written into.
		release, err := reserveDecode(reserve, im.Member, fp.Work+int64(max(fp.Out, cap(out))))
		if errors.Is(err, transform.ErrTooLarge) {
			// No room would ever hold it: a bad image, which a caller
			// skipping bad samples leaves out with its sample.
			return &PixelsError{Sample: owner[k], Member: im.Member, Err: err}
		}
		if err != nil {
			return err
		}
		res, err := p.Apply(out[:0], im.Data, transform.Key{}, &sc)
		release()
		if err != nil {
			return &PixelsError{Sample: owner[k], Member: im.Member, Err: err}
		}
		out = res.Out
		if err := put(key+".image."+strconv.Itoa(k)+".npy", out); err != nil {
			return err
		}
	}
	return nil
}

// reserveDecode reserves n bytes for member's decode with reserve, if
// any; an error names the member, and one that no room would mend
// (transform.ErrTooLarge) makes the image a bad one.
func reserveDecode(reserve Reserve, member string, n int64) (func(), error) {
	if reserve == nil {
		return func() {}, nil
	}
	release, err := reserve(n)
	switch {
	case errors.Is(err, transform.ErrTooLarge):
		return nil, err // a *PixelsError of Members'
	case err != nil:
		return nil, fmt.Errorf("member %s: %w", member, err)
	}
	return release, nil
}

// Write appends sequence key's members (Members) to tw, each of mode
// 0644 modified at 0 in ustar: for a caller that holds a tar.Writer.
// They are the bytes the pack stage serves, which it writes through
// internal/codec/ustar (sequences.Stage.PackVision, held to this by its
// tests).
func (wr *Writer) Write(tw *tar.Writer, key string, samples []Sample) error {
	return wr.Members(key, samples, func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}, nil)
}

// A PixelsError is Members' refusal of an image whose header read (its
// sample was laid out by it) but whose pixels do not decode: a PNG cut
// short, a JPEG whose scan is damaged. It is ErrBadImage, and names the
// image's sample by its place in the samples written, so that a caller
// skipping bad samples (--on-bad-image=skip) writes the sequence again
// without that one.
type PixelsError struct {
	Sample int    // the sample's index in Members' samples
	Member string // the image's member
	Err    error  // the decoder's
}

func (e *PixelsError) Error() string {
	return fmt.Sprintf("%v: member %s: %v", ErrBadImage, e.Member, e.Err)
}

// Unwrap is ErrBadImage and the decoder's error.
func (e *PixelsError) Unwrap() []error { return []error{ErrBadImage, e.Err} }

// resizer is the pipeline that resizes an image to w×h: torchvision's
// Resize([h, w]) with Pillow's bilinear filter, the whole image decoded
// (no reduced decode: Pillow's resize does not draft), as CHW.
func resizer(w, h int, opt transform.Options) (*transform.Pipeline, error) {
	off := false
	return transform.New("vision", transform.Spec{
		Ops:           []transform.Op{{Op: transform.OpResize, Size: transform.Size{H: h, W: w}}},
		Layout:        transform.CHW,
		ReducedDecode: &off,
	}, opt)
}

func int32s(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// Size is the tar bytes of sequence key's members (Members), as Write
// and the pack stage write them (the tar writer flushed, no end of
// archive): every member a ustar header and its data padded to a block.
// Known before any pixel is decoded, so that a server takes a batch's
// memory before it writes the batch.
func (wr *Writer) Size(key string, samples []Sample) int64 {
	n := int64(0)
	for _, s := range samples {
		n += int64(len(s.Images))
	}
	seq := int64(wr.Seq)
	size := tarMember(npy.HeaderLen("<i4", []int64{seq})+4*int(seq)) * 2
	size += tarMember(npy.HeaderLen("|u1", []int64{seq}) + int(seq))
	size += tarMember(npy.HeaderLen("<i4", []int64{n, 2})+8*int(n)) * 2
	for _, s := range samples {
		for _, im := range s.Images {
			size += tarMember(npy.HeaderLen("|u1", []int64{3, int64(im.OutH), int64(im.OutW)}) + 3*im.OutW*im.OutH)
		}
	}
	return size
}

// tarMember is a ustar member's bytes for n bytes of data.
func tarMember(n int) int64 { return ustar.BlockSize + ustar.Padded(int64(n)) }
