package vision

import (
	"encoding/binary"
	"fmt"

	"github.com/brandgw/brand/internal/errkind"
)

// ErrFactsFile marks a facts file that does not decode: damaged, cut
// short, of another version, or of another index than the one it is
// read for.
var ErrFactsFile = errkind.New(errkind.Upstream, "vision: bad facts file")

// factsMagic opens a facts file; its last byte is the version.
const factsMagic = "BRANDVF\x01"

// Bounds of a facts file, so that a damaged or hostile one is refused
// before it allocates: a fault's or a bad image's words, a model's
// bytes (tokenize.MaxModelBytes is below), images a sample (members
// numbers them up to 1<<20).
const (
	maxWhy        = 1 << 12
	maxModelBytes = 1 << 30
	maxImages     = 1<<20 + 1
)

// A FactsFile is a dataset version's facts as stored beside its index
// (docs/format.md, *Image-text facts*): the index version they are of,
// the tokenizer they were counted with (its file's bytes, which the
// server tokenizes with again when it writes a sequence), the pixel
// bound the images' headers were read under, and every sample's facts
// by sample ID.
type FactsFile struct {
	Index     string
	Tokenizer []byte
	MaxPixels int64
	Samples   []Facts
}

// MarshalBinary encodes f.
func (f *FactsFile) MarshalBinary() ([]byte, error) {
	if len(f.Index) > maxWhy || len(f.Tokenizer) > maxModelBytes || f.MaxPixels < 0 {
		return nil, fmt.Errorf("%w: an index name of %d bytes, a tokenizer of %d, a pixel bound of %d", ErrFactsFile, len(f.Index), len(f.Tokenizer), f.MaxPixels)
	}
	b := []byte(factsMagic)
	b = appendBytes(b, []byte(f.Index))
	b = appendBytes(b, f.Tokenizer)
	b = binary.AppendUvarint(b, uint64(f.MaxPixels))
	b = binary.AppendUvarint(b, uint64(len(f.Samples)))
	for i, s := range f.Samples {
		if s.Text < 0 || s.Fault >= numFaults || len(s.Images) > maxImages {
			return nil, fmt.Errorf("%w: sample %d: %d text tokens, fault %d, %d images", ErrFactsFile, i, s.Text, s.Fault, len(s.Images))
		}
		b = binary.AppendUvarint(b, uint64(s.Text))
		b = append(b, byte(s.Fault))
		b = appendBytes(b, []byte(clip(s.Why)))
		b = binary.AppendUvarint(b, uint64(len(s.Images)))
		for _, im := range s.Images {
			if im.W < 0 || im.H < 0 {
				return nil, fmt.Errorf("%w: sample %d: an image of %d×%d", ErrFactsFile, i, im.W, im.H)
			}
			b = binary.AppendUvarint(b, uint64(im.W))
			b = binary.AppendUvarint(b, uint64(im.H))
			b = appendBytes(b, []byte(clip(im.Bad)))
		}
	}
	return b, nil
}

// clip bounds a fault's words to what a file holds.
func clip(s string) string {
	if len(s) > maxWhy {
		return s[:maxWhy]
	}
	return s
}

func appendBytes(b, p []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(p))), p...)
}

// DecodeFacts decodes a facts file that must be of index version index
// and hold n samples (its index's). Every count is checked against the
// bytes left before anything is allocated for it.
func DecodeFacts(p []byte, index string, n int) (*FactsFile, error) {
	d := decoder{p: p}
	if len(p) < len(factsMagic) || string(p[:len(factsMagic)]) != factsMagic {
		return nil, fmt.Errorf("%w: not a facts file of this version", ErrFactsFile)
	}
	d.p = p[len(factsMagic):]
	f := &FactsFile{Index: string(d.bytes(maxWhy)), Tokenizer: d.bytes(maxModelBytes)}
	f.MaxPixels = int64(d.uint(1 << 62))
	count := d.uint(uint64(len(d.p)) / 3) // a sample takes 3 bytes at least
	if d.err == nil && (f.Index != index || count != uint64(n)) {
		return nil, fmt.Errorf("%w: of index %s with %d samples, read for index %s with %d", ErrFactsFile, f.Index, count, index, n)
	}
	f.Samples = make([]Facts, count)
	for i := range f.Samples {
		s := &f.Samples[i]
		s.Text = int(d.uint(1 << 31))
		s.Fault = Fault(d.byte())
		if s.Fault >= numFaults {
			d.fail("fault %d", s.Fault)
		}
		s.Why = string(d.bytes(maxWhy))
		k := d.uint(min(maxImages, uint64(len(d.p))/3))
		if d.err != nil {
			break
		}
		if k == 0 {
			continue
		}
		s.Images = make([]ImageFacts, k)
		for j := range s.Images {
			s.Images[j] = ImageFacts{W: int(d.uint(1 << 31)), H: int(d.uint(1 << 31)), Bad: string(d.bytes(maxWhy))}
		}
	}
	if d.err == nil && len(d.p) != 0 {
		d.fail("%d bytes after the last sample", len(d.p))
	}
	if d.err != nil {
		return nil, d.err
	}
	return f, nil
}

// decoder reads a facts file's fields; the first fault sticks.
type decoder struct {
	p   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrFactsFile, fmt.Sprintf(format, args...))
	}
	d.p = nil
}

func (d *decoder) uint(bound uint64) uint64 {
	v, n := binary.Uvarint(d.p)
	if n <= 0 || v > bound {
		d.fail("a count past its bound (%d) or cut short", bound)
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.p) == 0 {
		d.fail("cut short")
		return 0
	}
	c := d.p[0]
	d.p = d.p[1:]
	return c
}

func (d *decoder) bytes(bound uint64) []byte {
	n := d.uint(bound)
	if d.err == nil && n > uint64(len(d.p)) {
		d.fail("cut short")
	}
	if d.err != nil {
		return nil
	}
	b := d.p[:n:n]
	d.p = d.p[n:]
	return b
}
