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
// for the error that refuses them. An "mp4v" entry is named by its esds
// (objectTypes), since it holds whatever codec the esds states.
var unsupportedNames = map[string]string{
	"mp4v": "MPEG-4 visual (no object type stated)", "s263": "H.263", "h263": "H.263",
	"jpeg": "Motion JPEG", "mjpa": "Motion JPEG", "mjpb": "Motion JPEG", "png ": "PNG",
	"apch": "ProRes", "apcn": "ProRes", "apcs": "ProRes", "apco": "ProRes", "ap4h": "ProRes", "ap4x": "ProRes",
	"dvh1": "Dolby Vision HEVC", "dvhe": "Dolby Vision HEVC", "dva1": "Dolby Vision H.264", "dvav": "Dolby Vision H.264",
	"avc2": "H.264 (avc2)", "avc4": "H.264 (avc4)", "mvc1": "H.264 MVC", "vp08": "VP8",
	"encv": "encrypted video", "drmi": "encrypted video", "raw ": "uncompressed video", "2vuy": "uncompressed video",
	"mp4s": "MPEG-4 systems", "dvc ": "DV", "dvcp": "DV", "cvid": "Cinepak", "SVQ3": "Sorenson Video 3",
	"vvc1": "H.266", "vvi1": "H.266", "hvc2": "L-HEVC", "lhv1": "L-HEVC", "rle ": "QuickTime Animation",
}

// objectTypes name the codecs an "mp4v" entry holds by the object type
// indication of its esds (ISO/IEC 14496-1's table and mp4ra.org's, as
// FFmpeg's mov demuxer maps them): FFmpeg writes MPEG-4 part 2, MPEG-1
// and MPEG-2 video, Motion JPEG and PNG in MP4 this way, so the entry's
// type alone does not say which.
var objectTypes = map[byte]string{
	0x20: "MPEG-4 part 2", 0x21: "H.264", 0x23: "H.265",
	0x60: "MPEG-2 video", 0x61: "MPEG-2 video", 0x62: "MPEG-2 video", 0x63: "MPEG-2 video", 0x64: "MPEG-2 video", 0x65: "MPEG-2 video",
	0x6a: "MPEG-1 video", 0x6c: "Motion JPEG", 0x6d: "PNG", 0x6e: "JPEG 2000",
	0xa3: "VC-1", 0xa4: "Dirac", 0xb1: "VP9",
}

// unsupported is the error refusing a sample entry Brand does not read,
// naming the codec it holds.
func unsupported(e box) error {
	if e.typ == "mp4v" && len(e.body) >= visualEntryHeader {
		if oti, ok := objectType(e.body[visualEntryHeader:]); ok {
			name := objectTypes[oti]
			if name == "" {
				name = "an MPEG-4 systems object type Brand does not know"
			}
			return errorf(ErrUnsupported, "the video track's codec is %s (sample entry %q, object type 0x%02x); Brand reads H.264, H.265, VP9 and AV1 (in their own sample entries)", name, e.typ, oti)
		}
	}
	if name, known := unsupportedNames[e.typ]; known {
		return errorf(ErrUnsupported, "the video track's codec is %s (sample entry %q); Brand reads H.264, H.265, VP9 and AV1", name, e.typ)
	}
	return errorf(ErrUnsupported, "the video track's sample entry %q is not a codec Brand reads (H.264, H.265, VP9, AV1)", e.typ)
}

// objectType reads the object type indication of the esds box among a
// sample entry's child boxes: its ES_Descriptor (tag 3), past the
// optional fields its flags announce, holds a DecoderConfigDescriptor
// (tag 4) whose first byte it is. false if there is no esds or it does
// not parse.
func objectType(children []byte) (byte, bool) {
	var esds []byte
	_ = eachBox(children, 0, "mp4v", func(b box) error {
		if b.typ == "esds" && esds == nil {
			esds = b.body
		}
		return nil
	})
	r := reader{b: esds}
	r.full()
	descriptor := func(tag byte) bool {
		if r.u8() != tag {
			return false
		}
		for range 4 { // the size: up to 4 bytes of 7 bits, high bit "more"
			if r.u8()&0x80 == 0 {
				break
			}
		}
		return !r.short
	}
	if !descriptor(0x03) {
		return 0, false
	}
	r.u16() // ES_ID
	flags := r.u8()
	if flags&0x80 != 0 {
		r.u16() // dependsOn_ES_ID
	}
	if flags&0x40 != 0 {
		r.take(int(r.u8())) // URLstring
	}
	if flags&0x20 != 0 {
		r.u16() // OCR_ES_Id
	}
	if r.short || !descriptor(0x04) {
		return 0, false
	}
	oti := r.u8()
	return oti, !r.short
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
			return unsupported(e)
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
		case !lim.Frames.Fits(int(w), int(h)):
			return errorf(ErrLimit, "the video is %d × %d; its frames are read and decoded %s", w, h, lim.Frames)
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
