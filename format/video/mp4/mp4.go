package mp4

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video/framesize"
)

// The errors Index returns wrap one of these, and each of them wraps the
// format seam's kind (format.ErrInvalid, format.ErrUnsupported), so that
// a caller maps them to a status without knowing this package.
var (
	// ErrInvalid is a file that is not an ISO-BMFF/MP4/MOV file, or whose
	// metadata is damaged, truncated or lies (tables that disagree,
	// samples past the end of the file).
	ErrInvalid = fmt.Errorf("mp4: %w", format.ErrInvalid)
	// ErrNoVideo is a valid file without a video track.
	ErrNoVideo = fmt.Errorf("mp4: no video track: %w", format.ErrInvalid)
	// ErrLimit is metadata past one of Limits: a moov larger than
	// MetaBytes, more samples than Samples, a picture past Frames. It is
	// refused before anything is allocated for it.
	ErrLimit = fmt.Errorf("mp4: over a limit: %w", format.ErrInvalid)
	// ErrUnsupported is a valid file using something this package does
	// not index: a codec other than H.264, H.265, VP9 and AV1, several
	// non-empty edits, media data in another file, encryption.
	ErrUnsupported = fmt.Errorf("mp4: %w", format.ErrUnsupported)
)

// Source is what Index reads a file through: a range of its bytes. An
// error from it is returned wrapped, and is not ErrInvalid.
type Source interface {
	ReadRange(ctx context.Context, off int64, p []byte) error
}

// Bytes is a whole file in memory as a Source.
type Bytes []byte

// ReadRange copies b[off:off+len(p)] into p.
func (b Bytes) ReadRange(_ context.Context, off int64, p []byte) error {
	if off < 0 || off > int64(len(b)) || int64(len(p)) > int64(len(b))-off {
		return fmt.Errorf("mp4: read %d+%d past %d bytes", off, len(p), len(b))
	}
	copy(p, b[off:])
	return nil
}

// Limits bound what a file's metadata may make Index read and allocate.
// A zero field takes DefaultLimits'.
type Limits struct {
	// MetaBytes bounds the metadata read: the moov box, and every moof
	// box of a fragmented file together.
	MetaBytes int64
	// Samples bounds the video track's samples (frames).
	Samples int
	// Frames bounds the picture a sample entry states: the one bound
	// the decoder applies too (package framesize), so that a file the
	// index takes is one whose frames the decoder takes.
	Frames framesize.Bound
	// Boxes bounds the top-level boxes walked (a fragmented file has two
	// a fragment).
	Boxes int
}

// DefaultLimits are the limits of an unset Limits field: 256 MiB of
// metadata, 2^22 samples (38 hours at 30 frames a second), pictures
// within framesize.Default (16,384 a side, 8192 × 4352 pixels), and
// 2^21 top-level boxes.
var DefaultLimits = Limits{
	MetaBytes: 256 << 20,
	Samples:   1 << 22,
	Frames:    framesize.Default(),
	Boxes:     1 << 21,
}

// WithDefaults returns l with every unset field set to DefaultLimits'.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	if l.MetaBytes > 0 {
		d.MetaBytes = l.MetaBytes
	}
	if l.Samples > 0 {
		d.Samples = l.Samples
	}
	d.Frames = l.Frames.WithDefaults()
	if l.Boxes > 0 {
		d.Boxes = l.Boxes
	}
	return d
}

// File is what Index found in one file.
type File struct {
	// Size is the file's length.
	Size int64
	// Brand is the ftyp box's major brand ("isom", "qt  "), "" without one.
	Brand string
	// Moov is where the moov box is.
	Moov format.Range
	// Fragments is the number of moof boxes read (0 unless fragmented).
	Fragments int
	// Video is the file's video track: the first track whose handler is
	// "vide", which is the stream FFmpeg, and so PyAV, number first
	// (container.streams.video[0]). Other video tracks are ignored.
	Video Track
	// Reads and BytesRead are what indexing read from the Source.
	Reads     int
	BytesRead int64
}

// Track is one video track, indexed.
type Track struct {
	// ID is the track's tkhd track_ID.
	ID uint32
	// Timescale is the media's units of time a second (mdhd): every PTS
	// and DTS here is in them.
	Timescale uint32
	// Codec is FFmpeg's name of the codec: "h264", "hevc", "vp9", "av1".
	Codec string
	// Entry is the sample entry's type: "avc1", "avc3", "hvc1", "hev1",
	// "vp09", "av01".
	Entry string
	// Width and Height are the coded picture's, as the sample entry states.
	Width, Height int
	// Extradata is what FFmpeg gives the decoder as the codec's extradata:
	// the avcC, hvcC or av1C box's payload; nil for VP9, whose decoder
	// needs none (the vpcC box is in Config).
	Extradata []byte
	// Config is the codec configuration box's payload (avcC, hvcC, vpcC,
	// av1C).
	Config []byte
	// Matrix is the tkhd transformation matrix (a, b, u, c, d, v, x, y, w;
	// 16.16 fixed point but u, v, w 2.30), and Rotation the display
	// rotation it states: 0, 90, 180 or 270 degrees clockwise. A matrix
	// that is not a rotation by a multiple of 90 degrees (a flip, a
	// shear) has Rotation -1: the frames are served as coded either way.
	Matrix   [9]int32
	Rotation int
	// Edits are the elst entries as stored (Edit), and EditApplied
	// whether they changed the timestamps (package doc, "Edit lists").
	Edits []Edit
	// Samples are every sample a decoder is given, in decode order, as
	// FFmpeg's mov demuxer gives them as packets.
	Samples []Sample
	// Frames are the frames a decoder outputs, in presentation order:
	// every sample not discarded by the edit list, sorted by PTS (decode
	// order among equal PTS). A frame's byte offset, size and keyframe
	// flag are its sample's.
	Frames []Frame
	// GOPs are the groups of samples from one sync sample to the next, in
	// decode order.
	GOPs []GOP
}

// Edit is one entry of an elst box: Duration in the movie's timescale,
// MediaTime in the media's (-1 for an empty edit).
type Edit struct {
	Duration  int64
	MediaTime int64
}

// Sample is one sample (a compressed frame) of the video track.
type Sample struct {
	// Off and Size are its bytes in the file.
	Off  int64
	Size uint32
	// DTS and PTS are its decode and presentation timestamps in the
	// track's timescale, as FFmpeg's demuxer gives them (package doc).
	DTS, PTS int64
	// Key is set for a sync sample: decoding may start there.
	Key bool
	// Discard is set for a sample outside the edit list: decoded (later
	// samples may refer to it) but never output.
	Discard bool
}

// Frame is one output frame.
type Frame struct {
	// PTS is the frame's presentation timestamp, in the track's timescale.
	PTS int64
	// Sample is the frame's sample: its index in decode order.
	Sample int32
	// GOP is the index of the GOP the sample is in.
	GOP int32
}

// GOP is a group of pictures: the samples from one sync sample up to the
// next, in decode order.
type GOP struct {
	// First and End are its samples [First, End) in decode order;
	// Samples[First] is a sync sample, except in a file whose first sample
	// is not one (the first GOP then starts at sample 0 anyway).
	First, End int32
	// Leading is set when some of its frames are presented before its
	// sync sample: an open GOP, whose leading frames may refer to the GOP
	// before, so decoding them starts there.
	Leading bool
	// Ranges are its samples' bytes, ascending, adjacent ranges merged.
	Ranges []format.Range
	// Bytes is the total of Ranges.
	Bytes int64
}

// Seconds is pts in seconds.
func (t *Track) Seconds(pts int64) float64 {
	if t.Timescale == 0 {
		return math.NaN()
	}
	return float64(pts) / float64(t.Timescale)
}

// errorf returns an error wrapping kind with a message.
func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
}

// isKind reports whether err is one of this package's refusals (rather
// than a failing Source).
func isKind(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnsupported) || errors.Is(err, ErrNoVideo) || errors.Is(err, ErrLimit)
}
