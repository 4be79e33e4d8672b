package importance

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/brandgw/brand/internal/quote"
)

// Snapshot format identity (docs/importance.md, "Snapshot objects").
const (
	// Magic opens every encoded snapshot.
	Magic = "BRANDIMP"
	// FormatVersion is the snapshot format this package writes and reads.
	FormatVersion = 1
	// Ext is the file name extension of snapshot objects.
	Ext = ".brandimp"
	// KeyPrefix is where a dataset's snapshots live, relative to the
	// dataset root: inside the metadata prefix that no chunk key may use,
	// so a snapshot can never shadow or be mistaken for a chunk.
	KeyPrefix = "_brand/importance/"

	// MaxJobNameLen bounds a job name, in bytes.
	MaxJobNameLen = 128

	maxSamples = math.MaxUint32
	headerLen  = len(Magic) + 4
)

var (
	le         = binary.LittleEndian
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// A Snapshot is the sealed importance of one epoch of one job: a score per
// sample (the loss the sample last showed, or an inherited or default
// score), bound to the dataset index it was computed on. It is immutable
// and safe for concurrent use.
//
// Its Version is content-addressed: the first 16 hex digits of the SHA-256
// of its encoding. Two gateways sealing the same reports onto the same
// previous snapshot produce byte-identical objects with the same version,
// so an object written under a version never needs to change, and a request
// naming a version names exactly one order.
type Snapshot struct {
	indexID string
	job     string
	epoch   uint64
	scores  []float32
	version string
}

// NewSnapshot returns the snapshot of the given scores (one per sample of
// ds, each finite and >= 0) for epoch epoch of job. It copies scores. It
// exists for callers that compute scores elsewhere, such as a planner or a
// test; a gateway seals accumulators with Seal.
func NewSnapshot(ds Dataset, job string, epoch uint64, scores []float32) (*Snapshot, error) {
	if err := ValidJobName(job); err != nil {
		return nil, err
	}
	if len(ds.ID()) > math.MaxUint16 {
		return nil, fmt.Errorf("%w: index ID of %d bytes; at most %d", ErrInvalid, len(ds.ID()), math.MaxUint16)
	}
	if len(scores) != ds.NumSamples() || uint64(len(scores)) > maxSamples {
		return nil, fmt.Errorf("%w: %d scores for %d samples (at most %d)", ErrInvalid, len(scores), ds.NumSamples(), uint64(maxSamples))
	}
	for i, s := range scores {
		if !validScore(s) {
			return nil, fmt.Errorf("%w: score %d is %v; scores must be finite and >= 0", ErrInvalid, i, s)
		}
	}
	return newSnapshot(ds.ID(), job, epoch, slices.Clone(scores)), nil
}

// newSnapshot takes ownership of scores, which must be valid, and computes
// the version. -0 scores are stored as +0 so that equal scores encode alike.
func newSnapshot(indexID, job string, epoch uint64, scores []float32) *Snapshot {
	for i, s := range scores {
		if s == 0 {
			scores[i] = 0
		}
	}
	s := &Snapshot{indexID: indexID, job: job, epoch: epoch, scores: scores}
	sum := sha256.Sum256(s.MarshalBinary())
	s.version = hex.EncodeToString(sum[:])[:16]
	return s
}

// Seal turns the losses gathered in acc into the snapshot of acc's epoch.
// A sample with a reported loss takes it as its score. A sample with none
// keeps its score in prev, the snapshot of an earlier epoch; without prev
// (the first sealing of a job) it takes the mean of the reported losses,
// or 1 when none was reported, so that a sample never seen is neither
// favoured nor starved against those that were.
//
// prev may be nil. If it is not, it must belong to acc's index and job, or
// Seal returns an error wrapping ErrMismatch.
func Seal(prev *Snapshot, acc *Accumulator) (*Snapshot, error) {
	n := acc.NumSamples()
	if prev != nil && (prev.indexID != acc.indexID || prev.job != acc.job || len(prev.scores) != n) {
		return nil, fmt.Errorf("%w: previous snapshot is of index %s job %q (%d samples), accumulator of index %s job %q (%d samples)",
			ErrMismatch, prev.indexID, prev.job, len(prev.scores), acc.indexID, acc.job, n)
	}
	scores := make([]float32, n)
	var sum float64
	reported := 0
	for i := range scores {
		l, ok := acc.loss(i)
		switch {
		case ok:
			scores[i] = l
			sum += float64(l)
			reported++
		case prev != nil:
			scores[i] = prev.scores[i]
		default:
			scores[i] = float32(math.NaN()) // filled below
		}
	}
	if prev == nil {
		fill := float32(1)
		if reported > 0 {
			fill = float32(sum / float64(reported))
		}
		for i, s := range scores {
			if s != s { // NaN: never scored
				scores[i] = fill
			}
		}
	}
	return newSnapshot(acc.indexID, acc.job, acc.epoch, scores), nil
}

// IndexID returns the ID of the dataset index the snapshot belongs to.
func (s *Snapshot) IndexID() string { return s.indexID }

// Job returns the job name.
func (s *Snapshot) Job() string { return s.job }

// Epoch returns the epoch whose losses the snapshot sealed.
func (s *Snapshot) Epoch() uint64 { return s.epoch }

// NumSamples returns the number of scores, the dataset's sample count.
func (s *Snapshot) NumSamples() int { return len(s.scores) }

// Score returns sample i's score. It panics if i is out of range.
func (s *Snapshot) Score(i int) float32 { return s.scores[i] }

// Version returns the snapshot's content address: the first 16 hex digits
// of the SHA-256 of MarshalBinary's output.
func (s *Snapshot) Version() string { return s.version }

// Key returns the object key the snapshot is stored under, relative to the
// dataset root: ObjectKey(Job(), Version()).
func (s *Snapshot) Key() string { return ObjectKey(s.job, s.version) }

// ObjectKey returns the key of job's snapshot version, relative to the
// dataset root: "_brand/importance/<job>/<version>.brandimp".
func ObjectKey(job, version string) string {
	return KeyPrefix + job + "/" + version + Ext
}

// MarshalBinary encodes the snapshot (docs/importance.md): magic, format
// version, index ID, job, epoch, sample count, the scores as little-endian
// float32, and a CRC32C of everything before it. The encoding is
// canonical: equal snapshots encode to equal bytes. It never fails.
func (s *Snapshot) MarshalBinary() []byte {
	out := make([]byte, 0, headerLen+2+len(s.indexID)+2+len(s.job)+8+4+4*len(s.scores)+4)
	out = append(out, Magic...)
	out = le.AppendUint32(out, FormatVersion)
	out = le.AppendUint16(out, uint16(len(s.indexID)))
	out = append(out, s.indexID...)
	out = le.AppendUint16(out, uint16(len(s.job)))
	out = append(out, s.job...)
	out = le.AppendUint64(out, s.epoch)
	out = le.AppendUint32(out, uint32(len(s.scores)))
	for _, v := range s.scores {
		out = le.AppendUint32(out, math.Float32bits(v))
	}
	return le.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

// Decode parses an encoded snapshot and checks it against ds, the dataset
// it is about to be used with. Bad magic, an unknown format version, a
// length that disagrees with the header, a checksum mismatch, an invalid
// job name or a score that is not finite and >= 0 return an error wrapping
// ErrCorrupt; a snapshot of another index or sample count returns one
// wrapping ErrMismatch.
func Decode(data []byte, ds Dataset) (*Snapshot, error) {
	if len(data) < headerLen || string(data[:len(Magic)]) != Magic {
		return nil, fmt.Errorf("%w: no %q magic", ErrCorrupt, Magic)
	}
	if v := le.Uint32(data[len(Magic):]); v != FormatVersion {
		return nil, fmt.Errorf("%w: format version %d; this build reads version %d", ErrCorrupt, v, FormatVersion)
	}
	if len(data) < headerLen+4 {
		return nil, fmt.Errorf("%w: %d bytes, too short for a snapshot", ErrCorrupt, len(data))
	}
	body, sum := data[:len(data)-4], le.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, fmt.Errorf("%w: CRC32C %08x, recorded %08x", ErrCorrupt, got, sum)
	}
	r := reader{b: body[headerLen:]}
	indexID := string(r.bytes(int(r.uint16())))
	job := string(r.bytes(int(r.uint16())))
	epoch := r.uint64()
	n := int(r.uint32())
	if r.short || len(r.b) != 4*n {
		return nil, fmt.Errorf("%w: %d bytes do not hold the header and %d scores", ErrCorrupt, len(data), n)
	}
	if err := ValidJobName(job); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	scores := make([]float32, n)
	for i := range scores {
		scores[i] = math.Float32frombits(le.Uint32(r.b[4*i:]))
		if !validScore(scores[i]) {
			return nil, fmt.Errorf("%w: score %d is %v", ErrCorrupt, i, scores[i])
		}
	}
	if indexID != ds.ID() || n != ds.NumSamples() {
		return nil, fmt.Errorf("%w: snapshot of index %s with %d samples, dataset index is %s with %d",
			ErrMismatch, indexID, n, ds.ID(), ds.NumSamples())
	}
	return newSnapshot(indexID, job, epoch, scores), nil
}

// reader reads little-endian fields, remembering whether it ran short.
type reader struct {
	b     []byte
	short bool
}

func (r *reader) bytes(n int) []byte {
	if r.short || len(r.b) < n {
		r.short = true
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) uint16() uint16 {
	if p := r.bytes(2); p != nil {
		return le.Uint16(p)
	}
	return 0
}

func (r *reader) uint32() uint32 {
	if p := r.bytes(4); p != nil {
		return le.Uint32(p)
	}
	return 0
}

func (r *reader) uint64() uint64 {
	if p := r.bytes(8); p != nil {
		return le.Uint64(p)
	}
	return 0
}

// ValidJobName reports whether job can name a job: 1 to MaxJobNameLen
// bytes of ASCII letters, digits, '.', '_' and '-', and not "." or "..".
// The name becomes a path segment of the snapshot's object key, so it must
// be a segment every store accepts; anything else returns an error
// wrapping ErrInvalid.
func ValidJobName(job string) error {
	if job == "" || len(job) > MaxJobNameLen || job == "." || job == ".." {
		return fmt.Errorf("%w: job name %s: want 1 to %d characters, not \".\" or \"..\"", ErrInvalid, quote.Input(job), MaxJobNameLen)
	}
	for i := 0; i < len(job); i++ {
		switch c := job[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("%w: job name %s: byte %d (%q) is not a letter, digit, '.', '_' or '-'", ErrInvalid, quote.Input(job), i, c)
		}
	}
	return nil
}
