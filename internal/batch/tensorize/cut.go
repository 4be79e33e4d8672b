package tensorize

import (
	"fmt"

	"github.com/brandgw/brand/transform"
)

// cuts writes an image for the trainer's GPU decoder (a pipeline of
// Output transform.GPUJPEG): the JPEG cut losslessly to its crop
// (transform.Pipeline.GPUCrop) as a member named "….cut", then what is
// left to do as "….cut.json" (transform.CutNames, GPUCrop.AppendBox),
// both with the image's tar header fields but name and size. What the
// cut does not serve is the image's tensor, as the pipeline's tensors
// writes it and imagenet-train would: an image the cut refuses
// (transform.NotCut: a PNG, a CMYK JPEG, an image turned by its EXIF
// orientation), and one whose two members would not fit in the
// tensor's room — so a call's memory is reserved as the tensor path's,
// from the headers, before any image is cut, and no image is ever sent
// as more bytes than its tensor.
type cuts struct{ tensors tensors }

func (c cuts) write(out []byte, pc piece, image []byte, key transform.Key, sc *transform.Scratch) ([]byte, transform.Result, error) {
	at, end := len(out), len(out)+pc.size()
	jpegName, boxName, _ := transform.CutNames(pc.name)
	// The cut is written in place, after room for its header, whose
	// length (a USTAR or PAX header for this name) does not depend on a
	// size this small.
	hdr, err := tensorHeader(pc.tar, jpegName, 0)
	if err != nil {
		return out, transform.Result{}, fmt.Errorf("%w: member %q: %w", errMembers, pc.name, err)
	}
	room := out[at+len(hdr) : at+len(hdr) : end]
	g, err := c.tensors.p.GPUCrop(room, image, key)
	res := transform.Result{CPU: g.CPU, Denom: 1, Source: g.Geometry.Source}
	switch {
	case transform.NotCut(err):
		return c.tensor(out, pc, image, key, sc, res)
	case err != nil:
		return out, res, err
	case cap(g.JPEG) != cap(room):
		// The cut outgrew the room: appended elsewhere.
		return c.tensor(out, pc, image, key, sc, res)
	}
	n := len(g.JPEG)
	sized, err := tensorHeader(pc.tar, jpegName, n)
	if err != nil || len(sized) != len(hdr) {
		return c.tensor(out, pc, image, key, sc, res)
	}
	hdr = sized
	var box [96]byte
	b := g.AppendBox(box[:0])
	boxHdr, err := tensorHeader(pc.tar, boxName, len(b))
	if err != nil {
		return out, res, fmt.Errorf("%w: member %q: %w", errMembers, pc.name, err)
	}
	if at+len(hdr)+n+pad(n)+len(boxHdr)+len(b)+pad(len(b)) > end {
		return c.tensor(out, pc, image, key, sc, res)
	}
	copy(out[at:at+len(hdr)], hdr)
	out = out[:at+len(hdr)+n]
	out = append(out, zeros[:pad(n)]...)
	out = append(out, boxHdr...)
	out = append(out, b...)
	out = append(out, zeros[:pad(len(b))]...)
	return out, res, nil
}

// tensor writes the image's tensor instead of its cut, the cut's CPU
// (res, if it was tried) counted in the image's.
func (c cuts) tensor(out []byte, pc piece, image []byte, key transform.Key, sc *transform.Scratch, cut transform.Result) ([]byte, transform.Result, error) {
	out, res, err := c.tensors.write(out, pc, image, key, sc)
	res.CPU += cut.CPU
	return out, res, err
}
