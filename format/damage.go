package format

import (
	"fmt"

	"github.com/brandgw/brand/internal/codec/ustar"
)

// Damage confined to samples. A chunk served in place whose bytes fail
// the index's checksums on every read is damaged at rest. Most formats
// cannot say which samples the failing bytes hold — a Parquet page's
// values, a shard decompressed whole — so the whole chunk is damaged and
// none of its samples is served. A format whose samples are each read
// from bytes of their own, a video's GOPs, confines it: the chunk is
// decoded with the samples those bytes belong to written as damaged (one
// member, DamagedExt, saying why), and the others as usual. The reader
// of samples (internal/batch/reader) finds such a sample wherever the
// chunk came from — the store, the disk tier, a peer — and fails the
// read naming it, or leaves it out in skip mode: never its bytes.

// DamagedExt is the extension of the one member of a sample written
// damaged; its data is damagedMagic and the cause.
const DamagedExt = "damaged"

// damagedMagic begins a damaged sample's member: a field of a dataset
// that happens to be called "damaged" is not taken for one.
const damagedMagic = "BRAND-DAMAGED-AT-REST\n"

// Damage is a range of a chunk's object whose bytes failed the index's
// checksums on every read, and why, in words a client may be told (the
// object by its key in the dataset, never a local path).
type Damage struct {
	Range
	Cause string
}

// Confiner is implemented by a Decoder that confines damage at rest to
// the samples whose bytes it touches (WriterOptions.Damaged).
type Confiner interface {
	// Confines reports whether chunk c's samples are each read from
	// bytes of their own, so that Decode given WriterOptions.Damaged
	// writes those the damaged ranges touch as damaged (WriteDamaged)
	// and the others as usual.
	Confines(c int) bool
	// SampleRanges are the ranges of chunk c's object each of its
	// samples is read from, in sample order: an index with checksums
	// cuts its spans at their ends, so that a span never holds two
	// samples' bytes and damage is found sample by sample.
	SampleRanges(c int) [][]Range
}

// DefaultChecksums is implemented by a Format whose indexes record
// checksums unless told not to (dataset.InPlaceOptions.NoChecksums,
// `brand index --checksums=false`): one whose bytes damaged at rest
// decode into plausible wrong samples without an error, which nothing
// else would catch — a video's packets carry no checksum of their own.
// Its local files are pinned by their identity (size and modification
// time) with checksums too, not by a content ETag of their first and
// last 64 KiB: damage there would otherwise fail every chunk of the file
// rather than the samples it touches.
type DefaultChecksums interface {
	ChecksumsByDefault() bool
}

// Touches reports whether any of rs overlaps any of ds.
func Touches(rs []Range, ds []Damage) (Damage, bool) {
	for _, d := range ds {
		for _, r := range rs {
			if r.Off < d.End() && d.Off < r.End() {
				return d, true
			}
		}
	}
	return Damage{}, false
}

// WriteDamaged writes the current sample of w (after Begin(key)) as
// damaged: one member, DamagedExt, whose data says cause, cut so that
// the member takes at most room bytes of the resident form (what the
// sample would have taken intact, its bound's share). A sample whose
// name a plain ustar header cannot hold, or whose room cannot hold the
// member at all, is an error wrapping ErrDamaged: the caller's chunk is
// then damaged as a whole.
func WriteDamaged(w *Writer, key, cause string, room int64) error {
	msg := damagedMagic + cause
	for len(msg) > len(damagedMagic) && MemberLen(len(key)+1+len(DamagedExt), int64(len(msg))) > room {
		msg = msg[:max(len(damagedMagic), len(msg)-Block)]
	}
	if MemberLen(len(key)+1+len(DamagedExt), int64(len(msg))) > room || !ustar.Fits(int64(len(msg)), key, ".", DamagedExt) {
		return fmt.Errorf("%w: sample %s is damaged at rest (%s), and has no room to say so alone", ErrDamaged, key, cause)
	}
	return w.Add(DamagedExt, []byte(msg))
}

// SampleDamage reports whether sample, a resident sample's bytes, was
// written damaged (WriteDamaged), and why. It reads the first header's
// name field alone for any other sample.
func SampleDamage(sample []byte) (cause string, damaged bool) {
	return marked(sample, DamagedExt, damagedMagic)
}
