package video

import (
	"fmt"
	"strings"

	"github.com/brandgw/brand/internal/errkind"
)

// Sentinel errors. Every error the package returns wraps one of them.
var (
	// ErrNoDecoder: this binary was built without libavcodec (the
	// brand_libav tag; scripts/install-libav.sh), so it decodes no video.
	ErrNoDecoder = errkind.Named(errkind.NotImplemented, "no_video_decoder", "video: this build decodes no video (built without -tags brand_libav)")
	// ErrCodec: the stream's codec is not one this package decodes, or
	// this libavcodec has no decoder for it.
	ErrCodec = errkind.Named(errkind.Unprocessable, "bad_video", "video: unsupported codec")
	// ErrTooLarge: the stream's frames are larger than the bound, or
	// their decode needs more memory than the node has for decodes;
	// refused before a frame is allocated.
	ErrTooLarge = errkind.Named(errkind.Unprocessable, "bad_video", "video: frames larger than the bound")
	// ErrDecode: the packets do not decode (damaged, truncated, not of
	// the stated codec), or the decoder's frames are not what the index
	// says (another size, a frame missing or given twice). No frame of
	// the run is trusted then.
	ErrDecode = errkind.Named(errkind.Unprocessable, "bad_video", "video: cannot decode")
	// ErrRun: a run cannot give a wanted frame exactly as a decode of the
	// whole stream would: it does not start at a keyframe, the frame is
	// not in it, or the frame is a leading picture of the run's first
	// keyframe (an open GOP) that needs the group before it.
	ErrRun = errkind.Named(errkind.Unprocessable, "bad_video", "video: frame not decodable from this run")
)

// Stream is what a container index says of a video stream and what a
// decoder needs before its first packet.
type Stream struct {
	// Codec names the codec, as libavcodec names it ("h264", "hevc",
	// "vp9", "av1") or as an MP4 sample entry does ("avc1", "avc3",
	// "hvc1", "hev1", "vp09", "av01").
	Codec string
	// Width and Height are the frames' size in pixels as stored (before
	// any rotation).
	Width, Height int
	// Extradata is the codec's configuration record as libavformat gives
	// it to a decoder: the payload of the sample entry's avcC, hvcC or
	// av1C box (without the box's size and type); for VP9, the vpcC
	// payload or nothing (the decoder is given none, as PyAV's is not).
	Extradata []byte
	// Reorder is the stream's reorder depth as its index knows it (the
	// most frames that precede a frame in decode order and follow it in
	// presentation order, over the whole stream: ReorderDepth of its
	// packets; libavformat gives PyAV's decoder the same as video_delay),
	// 0 when not known. A run is decoded with the larger of it and the
	// run's own: a decoder given more only waits longer, and a stream's
	// runs, whatever their length, then share one pooled decoder context
	// (the pool keys contexts by it).
	Reorder int
	// Rotation is the display rotation the track's matrix states, in
	// degrees clockwise (0, 90, 180, 270; mp4.Track.Rotation: ffprobe's
	// display-matrix rotation negated), reported with the frames and not
	// applied: frames are served as stored, as PyAV decodes them.
	Rotation int
}

// Packet is one compressed frame of a stream.
type Packet struct {
	// PTS and DTS are the presentation and decode timestamps in the
	// stream's time base.
	PTS, DTS int64
	// Key marks a keyframe (an MP4 sync sample).
	Key bool
	// Data is the sample's bytes as stored (length-prefixed NAL units
	// for H.264 and H.265 in MP4).
	Data []byte
}

// Run is a stretch of a stream's packets in decode order, from a
// keyframe, decoded in one go: one keyframe group or several adjacent
// ones (Cover plans them).
type Run struct {
	Stream  Stream
	Packets []Packet
	// First says the run starts at the stream's first packet, so that
	// decoding it is the start of a whole-stream decode: only then are
	// the leading pictures of its first keyframe served.
	First bool
}

// Frame is one decoded frame handed to Decode's callback.
type Frame struct {
	// PTS is the frame's presentation timestamp (its packet's).
	PTS int64
	// Packet is the index of the frame's packet in the run.
	Packet int
	// Width and Height are the frame's size; RGB is its pixels, packed
	// RGB rows (Width*3 bytes each, no padding), exactly PyAV's
	// frame.to_ndarray(format="rgb24"). RGB is valid only during the
	// callback.
	Width, Height int
	RGB           []byte
	// Format is the decoder's pixel format ("yuv420p", "yuvj420p",
	// "yuv420p10le", ...).
	Format string
}

// codec is a codec this package decodes.
type codec int

const (
	codecH264 codec = 1 + iota
	codecHEVC
	codecVP9
	codecAV1
)

func (c codec) String() string {
	switch c {
	case codecH264:
		return "h264"
	case codecHEVC:
		return "hevc"
	case codecVP9:
		return "vp9"
	case codecAV1:
		return "av1"
	}
	return fmt.Sprintf("codec(%d)", int(c))
}

// parseCodec maps a stream's codec name to a codec, or ErrCodec naming
// it and the codecs there are.
func parseCodec(name string) (codec, error) {
	switch strings.ToLower(name) {
	case "h264", "avc", "avc1", "avc3":
		return codecH264, nil
	case "hevc", "h265", "hvc1", "hev1":
		return codecHEVC, nil
	case "vp9", "vp09":
		return codecVP9, nil
	case "av1", "av01":
		return codecAV1, nil
	}
	return 0, fmt.Errorf("%w %q: Brand decodes h264, hevc, vp9 and av1", ErrCodec, name)
}

// Build names the video decoder this binary has, for people (`brand
// version`, the start-up log): the libraries and the decoder each codec
// opens, or that there is none.
func Build() string {
	if !available {
		return "none (built without -tags brand_libav)"
	}
	var ds []string
	for _, c := range []codec{codecH264, codecHEVC, codecVP9, codecAV1} {
		if n := decoderName(c); n != "" {
			ds = append(ds, c.String()+"="+n)
		}
	}
	return libavVersion() + " (" + strings.Join(ds, ", ") + ")"
}

// Available reports whether this build decodes video at all.
func Available() bool { return available }
