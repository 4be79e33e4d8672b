package api

import (
	"fmt"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/quote"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Query parameters of a clip job (Job.Clip, docs/http-api.md "Video
// clips"): over a tree of videos, clip=T frames stride= apart, the videos
// resampled at fps= first, one clip a segment of step= frames, its start
// drawn in the segment or its first (clip_start=); over a LeRobot
// dataset, windows of rows and frames around each anchor row
// (delta_timestamps=, in seconds, as LeRobot's delta_timestamps; or
// frames=, in frames); the frames' array layout (clip_layout=); and the
// GOP-then-sample order of each window (gop_window=, docs/shuffle.md
// §17).
const (
	ParamClip            = "clip"
	ParamStride          = "stride"
	ParamFPS             = "fps"
	ParamStep            = "step"
	ParamClipStart       = "clip_start"
	ParamClipLayout      = "clip_layout"
	ParamDeltaTimestamps = "delta_timestamps"
	ParamFrames          = "frames"
	ParamGOPWindow       = "gop_window"
)

// ClipParams are the parameters of Job.Clip, in the order Values writes
// them.
var ClipParams = []string{ParamClip, ParamStride, ParamFPS, ParamStep, ParamClipStart, ParamClipLayout, ParamDeltaTimestamps, ParamFrames, ParamGOPWindow}

// The bounds of a clip job's parameters: a request's work stays bounded.
const (
	MaxClipFrames = 4096  // frames a clip, or offsets a window
	MaxClipStride = 65536 // frames between a clip's frames
	MaxClipFPS    = 1000.0
	MaxClipStep   = 1 << 30
	MaxWindows    = 64 // windows of a LeRobot job
	MaxGOPWindow  = 1 << 20
)

// The clip layouts (clip_layout=): the order of a clip tensor's axes.
const (
	ClipTHWC = "thwc" // (T, H, W, 3): frames as PyAV's to_ndarray gives them, stacked (the default)
	ClipTCHW = "tchw" // (T, 3, H, W): torchvision's read_video(output_format="TCHW"), LeRobot's frames
	ClipCTHW = "cthw" // (3, T, H, W): torchvision's video models' input
)

// ErrClip marks a clip parameter that does not parse or is out of bounds.
var ErrClip = errkind.New(errkind.Invalid, "clip parameter")

// Clip is a video job's clip parameters: a job that sets Frames or
// Windows serves clip samples, each a pure function of (dataset version,
// seed, epoch, sample) — their frames decoded on the data node — rather
// than the dataset's samples as stored (docs/http-api.md, "Video clips").
// The zero value is no clip job.
type Clip struct {
	// Frames is the frames a clip holds (clip=T); Stride the frames
	// between its consecutive frames (stride=, 0: 1); FPS resamples each
	// video to this rate by its timestamps first (fps=, 0: the videos'
	// own frames); Step the frames between the starts of consecutive
	// segments, each one sample (step=, 0: a clip's span, so that clips
	// do not overlap); First starts each clip at its segment's first
	// frame (clip_start=first) rather than at one drawn within it anew
	// each epoch (clip_start=random, the default). A tree of videos'.
	Frames, Stride int
	FPS            float64
	Step           int
	First          bool
	// Layout is the frames' array layout (clip_layout=): ClipTHWC ("" is
	// it), ClipTCHW or ClipCTHW.
	Layout string
	// Windows are a LeRobot job's windows around each anchor row
	// (delta_timestamps= or frames=): a key — a camera or a column — and
	// its offsets. A window with no key applies to every camera given
	// none of its own.
	Windows []ClipWindow
	// GOPWindow, when positive, orders each window's clips GOP then
	// sample (gop_window=G, docs/shuffle.md §17): its keyframe groups'
	// clips shuffled together G groups at a time, so that a GOP's clips
	// fall close together and its frames are held briefly. 0 is the
	// default order, a window's clips uniformly mixed.
	GOPWindow int
}

// ClipWindow is one window of a LeRobot clip job: the key it reads and
// the offsets around the anchor, in seconds (as LeRobot's
// delta_timestamps), or in frames when InFrames (frames=).
type ClipWindow struct {
	Key      string
	Offsets  []float64
	InFrames bool
}

// On reports whether the job serves clips.
func (c Clip) On() bool { return c.Frames > 0 || len(c.Windows) > 0 }

// LayoutName is the layout as written: Layout, or "thwc" when "".
func (c Clip) LayoutName() string {
	if c.Layout == "" {
		return ClipTHWC
	}
	return c.Layout
}

// Params are Job.Clip's parameters (ClipParams).
func (*Clip) Params() []string { return ClipParams }

// Set parses the clip parameter name's value v into c.
func (c *Clip) Set(name, v string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: "+format, append([]any{ErrClip, name}, args...)...)
	}
	integer := func(lo, hi int) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, bad("an integer in [%d, %d], got %s", lo, hi, quote.Input(v))
		}
		return n, nil
	}
	var err error
	switch name {
	case ParamClip:
		c.Frames, err = integer(1, MaxClipFrames)
	case ParamStride:
		c.Stride, err = integer(1, MaxClipStride)
	case ParamStep:
		c.Step, err = integer(1, MaxClipStep)
	case ParamFPS:
		f, perr := strconv.ParseFloat(v, 64)
		if perr != nil || !(f > 0 && f <= MaxClipFPS) {
			return bad("a rate in frames a second in (0, %g], got %s", MaxClipFPS, quote.Input(v))
		}
		c.FPS = f
	case ParamClipStart:
		switch v {
		case "random":
			c.First = false
		case "first":
			c.First = true
		default:
			return bad("random or first, got %s", quote.Input(v))
		}
	case ParamClipLayout:
		switch v {
		case ClipTHWC, ClipTCHW, ClipCTHW:
			c.Layout = v
		default:
			return bad("%s, %s or %s, got %s", ClipTHWC, ClipTCHW, ClipCTHW, quote.Input(v))
		}
	case ParamGOPWindow:
		c.GOPWindow, err = integer(1, MaxGOPWindow)
	case ParamDeltaTimestamps, ParamFrames:
		ws, perr := ParseWindows(v, name == ParamFrames)
		if perr != nil {
			return bad("%v", perr)
		}
		for _, w := range ws {
			if slices.ContainsFunc(c.Windows, func(o ClipWindow) bool { return o.Key == w.Key }) {
				return bad("the window of %s given twice", quote.Input(w.Key))
			}
		}
		c.Windows = append(c.Windows, ws...)
		if len(c.Windows) > MaxWindows {
			return bad("%d windows, at most %d", len(c.Windows), MaxWindows)
		}
	default:
		return fmt.Errorf("%w: %s is not a clip parameter", ErrClip, quote.Input(name))
	}
	return err
}

// ParseWindows reads a LeRobot job's windows: "KEY:O,O,...;KEY:O,..." —
// each key a camera or a column, each O an offset in seconds (or, with
// inFrames, a whole number of frames) — or "O,O,..." alone, a window for
// every camera. Keys are 1 to 256 bytes of anything but ':', ';' and
// ','.
func ParseWindows(v string, inFrames bool) ([]ClipWindow, error) {
	var out []ClipWindow
	for part := range strings.SplitSeq(v, ";") {
		key, offs, keyed := strings.Cut(part, ":")
		if !keyed {
			key, offs = "", part
		}
		switch {
		case keyed && (key == "" || len(key) > 256 || strings.ContainsAny(key, ",;")):
			return nil, fmt.Errorf("a window's key of %d bytes in %s (1 to 256, no ',' or ';')", len(key), quote.Input(part))
		case slices.ContainsFunc(out, func(w ClipWindow) bool { return w.Key == key }):
			return nil, fmt.Errorf("the window of %s twice", quote.Input(key))
		}
		w := ClipWindow{Key: key, InFrames: inFrames}
		for o := range strings.SplitSeq(offs, ",") {
			var x float64
			if inFrames {
				n, err := strconv.Atoi(strings.TrimSpace(o))
				if err != nil || n < -MaxClipStep || n > MaxClipStep {
					return nil, fmt.Errorf("an offset %s is not a whole number of frames", quote.Input(o))
				}
				x = float64(n)
			} else {
				f, err := strconv.ParseFloat(strings.TrimSpace(o), 64)
				if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e6 {
					return nil, fmt.Errorf("an offset %s is not a number of seconds", quote.Input(o))
				}
				x = f
			}
			w.Offsets = append(w.Offsets, x)
		}
		if len(w.Offsets) > MaxClipFrames {
			return nil, fmt.Errorf("the window of %s has %d offsets, at most %d", quote.Input(key), len(w.Offsets), MaxClipFrames)
		}
		out = append(out, w)
	}
	return out, nil
}

// formatWindows writes windows back in ParseWindows' form.
func formatWindows(ws []ClipWindow) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteByte(';')
		}
		if w.Key != "" {
			b.WriteString(w.Key)
			b.WriteByte(':')
		}
		for j, o := range w.Offsets {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatFloat(o, 'g', -1, 64))
		}
	}
	return b.String()
}

// setValues writes c's parameters into v: those at their defaults are
// left out.
func (c Clip) setValues(v url.Values) {
	if c.Frames > 0 {
		v.Set(ParamClip, strconv.Itoa(c.Frames))
	}
	if c.Stride > 1 {
		v.Set(ParamStride, strconv.Itoa(c.Stride))
	}
	if c.FPS > 0 {
		v.Set(ParamFPS, strconv.FormatFloat(c.FPS, 'g', -1, 64))
	}
	if c.Step > 0 {
		v.Set(ParamStep, strconv.Itoa(c.Step))
	}
	if c.First {
		v.Set(ParamClipStart, "first")
	}
	if c.Layout != "" && c.Layout != ClipTHWC {
		v.Set(ParamClipLayout, c.Layout)
	}
	var secs, frames []ClipWindow
	for _, w := range c.Windows {
		if w.InFrames {
			frames = append(frames, w)
		} else {
			secs = append(secs, w)
		}
	}
	if len(secs) > 0 {
		v.Set(ParamDeltaTimestamps, formatWindows(secs))
	}
	if len(frames) > 0 {
		v.Set(ParamFrames, formatWindows(frames))
	}
	if c.GOPWindow > 0 {
		v.Set(ParamGOPWindow, strconv.Itoa(c.GOPWindow))
	}
}

// Key is the clip parameters that fix which frames a sample holds and
// the order of the samples, as one canonical string (the layout, which
// only arranges the frames, is left out): what names a clip job's order
// among a dataset's streams, and what ParseClipKey reads back on any
// node. "" for no clip job.
func (c Clip) Key() string {
	if !c.On() {
		return ""
	}
	v := url.Values{}
	c.Layout = ""
	c.setValues(v)
	return v.Encode()
}

// ParseClipKey reads a Key back.
func ParseClipKey(key string) (Clip, error) {
	v, err := url.ParseQuery(key)
	if err != nil {
		return Clip{}, fmt.Errorf("%w: %s: %w", ErrClip, quote.Input(key), err)
	}
	var c Clip
	for _, name := range ClipParams {
		if s := v.Get(name); s != "" {
			if err := c.Set(name, s); err != nil {
				return Clip{}, err
			}
		}
	}
	if !c.On() {
		return Clip{}, fmt.Errorf("%w: %s names no clip", ErrClip, quote.Input(key))
	}
	return c, nil
}
