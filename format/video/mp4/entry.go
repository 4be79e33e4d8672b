package mp4

import "slices"

// sampleEntry is the video track's first sample entry.
type sampleEntry struct {
	tag           string // the entry's type: "avc1"
	codec         string // FFmpeg's codec name: "h264"
	width, height int
	dref          int    // data_reference_index (1-based)
	config        []byte // the codec configuration box's payload
	extradata     []byte
}

// codecs are the sample entries Brand reads: the codec's FFmpeg name,
// the configuration box, whether the box is the decoder's extradata (as
// FFmpeg's mov demuxer makes it), and whether the entry needs the box.
var codecs = map[string]struct {
	name, box       string
	extra, required bool
}{
	"avc1": {"h264", "avcC", true, true},
	"avc3": {"h264", "avcC", true, false},
	"hvc1": {"hevc", "hvcC", true, true},
	"hev1": {"hevc", "hvcC", true, false},
	"vp09": {"vp9", "vpcC", false, false},
	"av01": {"av1", "av1C", true, false},
}

// unsupportedNames names codecs of sample entries Brand does not read,
// for the error that refuses them.
var unsupportedNames = map[string]string{
	"mp4v": "MPEG-4 part 2", "s263": "H.263", "h263": "H.263",
	"jpeg": "Motion JPEG", "mjpa": "Motion JPEG", "mjpb": "Motion JPEG", "png ": "PNG",
	"apch": "ProRes", "apcn": "ProRes", "apcs": "ProRes", "apco": "ProRes", "ap4h": "ProRes", "ap4x": "ProRes",
	"dvh1": "Dolby Vision HEVC", "dvhe": "Dolby Vision HEVC", "dva1": "Dolby Vision H.264", "dvav": "Dolby Vision H.264",
	"avc2": "H.264 (avc2)", "avc4": "H.264 (avc4)", "mvc1": "H.264 MVC", "vp08": "VP8",
	"encv": "encrypted video", "drmi": "encrypted video", "raw ": "uncompressed video", "2vuy": "uncompressed video",
	"mp4s": "MPEG-4 systems", "dvc ": "DV", "dvcp": "DV", "cvid": "Cinepak", "SVQ3": "Sorenson Video 3",
	"vvc1": "H.266", "vvi1": "H.266", "hvc2": "L-HEVC", "lhv1": "L-HEVC", "rle ": "QuickTime Animation",
}

// visualEntryHeader is the size of a VisualSampleEntry's fields before
// its child boxes.
const visualEntryHeader = 78

// maxConfig bounds a codec configuration box: parameter sets are a few
// hundred bytes; FFmpeg refuses extradata past 1 GiB, this far sooner.
const maxConfig = 1 << 20

func (t *trak) parseStsd(s box, lim Limits) error {
	r := reader{b: s.body}
	r.full()
	n := r.u32()
	if r.short {
		return errorf(ErrInvalid, "stsd box at %d is cut off", s.off)
	}
	t.entries = int(n)
	if n == 0 {
		return errorf(ErrInvalid, "the video track's stsd box at %d has no sample entry", s.off)
	}
	first := true
	return eachBox(r.b, s.off+16, "stsd", func(e box) error {
		if !first {
			return nil
		}
		first = false
		c, ok := codecs[e.typ]
		if !ok {
			if name, known := unsupportedNames[e.typ]; known {
				return errorf(ErrUnsupported, "the video track's codec is %s (sample entry %q); Brand reads H.264, H.265, VP9 and AV1", name, e.typ)
			}
			return errorf(ErrUnsupported, "the video track's sample entry %q is not a codec Brand reads (H.264, H.265, VP9, AV1)", e.typ)
		}
		er := reader{b: e.body}
		er.take(6)
		dref := er.u16()
		er.take(16)
		w, h := er.u16(), er.u16()
		er.take(visualEntryHeader - 16 - 6 - 2 - 4)
		if er.short {
			return errorf(ErrInvalid, "the %q sample entry at %d is cut off", e.typ, e.off)
		}
		se := sampleEntry{tag: e.typ, codec: c.name, width: int(w), height: int(h), dref: int(dref)}
		// The picture is bounded before anything is made for it.
		switch {
		case w == 0 || h == 0:
			return errorf(ErrInvalid, "the %q sample entry states a picture of %d × %d", e.typ, w, h)
		case int(w) > lim.Width || int(h) > lim.Height || int64(w)*int64(h) > lim.Pixels:
			return errorf(ErrLimit, "the video is %d × %d; at most %d × %d and %d pixels are read", w, h, lim.Width, lim.Height, lim.Pixels)
		}
		err := eachBox(er.b, e.off+8+visualEntryHeader, e.typ, func(cb box) error {
			if cb.typ != c.box || se.config != nil {
				return nil
			}
			if len(cb.body) > maxConfig {
				return errorf(ErrLimit, "the %q box at %d is %d bytes; at most %d are read", cb.typ, cb.off, len(cb.body), maxConfig)
			}
			se.config = slices.Clone(cb.body)
			return nil
		})
		if err != nil {
			return err
		}
		if se.config == nil && c.required {
			return errorf(ErrInvalid, "the %q sample entry at %d has no %q box: the decoder's parameter sets are missing", e.typ, e.off, c.box)
		}
		if c.extra {
			se.extradata = se.config
		}
		t.entry = se
		return nil
	})
}
