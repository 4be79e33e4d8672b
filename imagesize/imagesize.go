// Package imagesize is each sample's image's displayed size as a fact
// of a dataset's index: what a job that batches images by their shape
// (a generation model's aspect-ratio buckets) lays its epochs out from
// before it reads a sample.
//
// A sample's size is its first image member's (Read: a member named
// .jpg, .jpeg or .png, in the sample's order), read from the image's
// header alone with its EXIF orientation applied
// (transform.DisplayedDims): no pixel is decoded, and a header claiming
// more pixels than the bound is the sample's fault, not the reader's.
// `brand index --sizes` reads every sample once and stores the sizes
// beside the index (a File, at stored.SizesKey); the gateway loads them
// with the index version they name (catalog.Dataset.LoadSizes), and the
// bucket stage, which reads a sample the index does not hold, calls Read
// too: one rule, both sides.
//
// # Costs
//
// A File is 2 to 6 bytes a sample stored (its width and height as
// varints), and 8 bytes a sample loaded; a sample without a readable image
// adds its reason, each distinct reason stored once. Reading a size takes
// a header's bytes: a PNG's first 33, a JPEG's markers up to its frame
// header.
package imagesize

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // Decoded's decoders
	_ "image/png"
	"io"
	"iter"
	"strings"

	"github.com/brandgw/brand/transform"
)

// Size is a sample's image's displayed size: width and height with its
// EXIF orientation applied (a JPEG whose orientation is 5–8 swaps them).
// Zero when the sample has no image member or its header does not read
// (File.Bad says why).
type Size struct{ W, H uint32 }

// NoImage is the reason of a sample without an image member.
const NoImage = "no image member (.jpg, .jpeg or .png)"

// IsImage reports whether a sample's member name is an image the sizes
// are read from: extension .jpg, .jpeg or .png (case-insensitive), as
// WebDataset names them (key.jpg, key.0.png, KEY.JPEG).
func IsImage(member string) bool {
	i := strings.LastIndexByte(member, '.')
	if i < 0 {
		return false
	}
	switch ext := member[i+1:]; {
	case strings.EqualFold(ext, "jpg"), strings.EqualFold(ext, "jpeg"), strings.EqualFold(ext, "png"):
		return true
	}
	return false
}

// Read returns the displayed size of the first image member (IsImage)
// of a sample given as its members, name and bytes, in order — the rule
// the index and the gateway's bucket stage both use — or a zero Size and
// why: NoImage, or the image's header refused (not a JPEG or PNG, cut
// short, more stored pixels than maxPixels; 0 is
// transform.DefaultMaxPixels). The members after the first image are
// not asked for. Read is a pure function of the members and the bound.
func Read(members iter.Seq2[string, []byte], maxPixels int64) (Size, string) {
	return read(members, maxPixels, false)
}

// Decoded is Read with the image's data decoded whole, not its header
// alone: an image whose header reads but whose data does not decode (cut
// short, damaged) has a size by Read and would fail only at its step;
// here it has why ("jpg: the data does not decode: …"). It costs each
// image's decode, once (brand index --sizes); its decoders are the
// standard library's, which the gateway's match (transform).
func Decoded(members iter.Seq2[string, []byte], maxPixels int64) (Size, string) {
	return read(members, maxPixels, true)
}

func read(members iter.Seq2[string, []byte], maxPixels int64, decode bool) (Size, string) {
	for name, data := range members {
		if !IsImage(name) {
			continue
		}
		ext := name[strings.LastIndexByte(name, '.')+1:]
		w, h, err := transform.DisplayedDims(data, maxPixels)
		if err != nil {
			return Size{}, fmt.Sprintf("%s: %v", ext, err)
		}
		if decode {
			// The header read, and bounded the pixels the decode holds.
			if _, _, err := image.Decode(bytes.NewReader(data)); err != nil {
				return Size{}, fmt.Sprintf("%s: the data does not decode: %v", ext, err)
			}
		}
		return Size{W: uint32(w), H: uint32(h)}, ""
	}
	return Size{}, NoImage
}

// DecodedTar is Decoded of a sample given whole as a tar of its members.
func DecodedTar(sample []byte, maxPixels int64) (Size, string) {
	return read(tarMembers(sample, nil), maxPixels, true)
}

// Of is Read under transform's default pixel bound.
func Of(members iter.Seq2[string, []byte]) (Size, string) { return Read(members, 0) }

// ReadTar is Read of a sample given as a tar of its members (a sample's
// bytes as a chunk holds them, or as a gateway serves them), its members'
// bytes not copied. short reports that the bytes ended before the answer
// was settled — before an image member, or inside the image's header —
// so that a caller holding a prefix of the sample reads more and asks
// again (a caller holding the whole sample has its answer). A tar that
// does not parse ends its members there.
func ReadTar(sample []byte, maxPixels int64) (s Size, bad string, short bool) {
	var cut bool
	s, bad = Read(tarMembers(sample, func(s, c bool) { short, cut = s, c }), maxPixels)
	if bad == "" {
		return s, "", false
	}
	return s, bad, short || cut
}

// tarMembers are a tar's regular members, their bytes not copied; ended
// is told, if not nil, whether the tar ended before its end of archive
// (short) and whether the last member handed out is shorter than its
// header says (cut). A tar that does not parse ends its members there.
func tarMembers(sample []byte, ended func(short, cut bool)) iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		r := bytes.NewReader(sample)
		tr := tar.NewReader(r)
		cut := false
		for {
			h, err := tr.Next()
			if err != nil {
				if ended != nil {
					ended(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF), cut)
				}
				return
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			at := r.Size() - int64(r.Len())
			n := min(h.Size, int64(r.Len()))
			cut = n < h.Size
			if ended != nil {
				ended(false, cut)
			}
			if !yield(h.Name, sample[at:at+n]) {
				return
			}
		}
	}
}
