package video

import (
	"fmt"
	"slices"

	"github.com/brandgw/brand/transform"
)

// Layout is the order of a clip tensor's axes.
type Layout string

const (
	// THWC is frames, height, width, channels: (T, H, W, 3), each frame
	// as PyAV's to_ndarray gives it, stacked (the default).
	THWC Layout = "thwc"
	// TCHW is frames, channels, height, width: torchvision's read_video
	// with output_format="TCHW", and LeRobot's decoded frames.
	TCHW Layout = "tchw"
	// CTHW is channels, frames, height, width: the input torchvision's
	// video classification models take (after batching).
	CTHW Layout = "cthw"
)

// ParseLayout reads a layout's name; "" is THWC.
func ParseLayout(s string) (Layout, error) {
	switch l := Layout(s); l {
	case "":
		return THWC, nil
	case THWC, TCHW, CTHW:
		return l, nil
	}
	return "", fmt.Errorf("%w: clip layout %q: thwc, tchw or cthw", ErrRun, s)
}

// Clip is one sample's frames: their PTS in clip order (a PTS may repeat,
// as a window padded at an episode's end repeats its edge frame) and the
// key of the clip's draws (transform.SampleKey of the clip's sample).
type Clip struct {
	Frames []int64
	Key    transform.Key
}

// Clips assembles the tensors of clips of one stream: each clip's
// geometry (crop box, size, flip) is drawn once from its key by the
// pipeline — the draws an image of the frames' size would get for that
// key — and applied identically to each of its frames with the
// transform package's resampler; every frame is written, as a .npy
// uint8 array of the clip's layout, into each place any clip names it.
// Decoder.Decode's callback is Put, so a frame several overlapping clips
// want is decoded once and transformed once per clip.
//
// A Clips is used by one goroutine at a time.
type Clips struct {
	clips  []Clip
	geo    []*transform.Geometry
	layout Layout
	stream Stream
	out    [][]byte
	data   []int // where each clip's array starts in out[i]
	size   [][2]int
	slots  map[int64][]slot
	done   map[int64]bool
	sc     transform.Scratch
}

type slot struct{ clip, t int }

// NewClips prepares clips of frames of stream s: p's geometry (nil for
// the frames as decoded), the layout, and each clip's .npy header written
// into dst[i] (appended to it; nil allocates), whose capacity should hold
// Sizes()[i] more bytes. The stream's size is checked against p's pixel
// bound; a clip with no frames is ErrRun.
func NewClips(p *transform.Pipeline, s Stream, clips []Clip, layout Layout, dst [][]byte) (*Clips, error) {
	if layout == "" {
		layout = THWC
	}
	if _, err := ParseLayout(string(layout)); err != nil {
		return nil, err
	}
	c := &Clips{clips: clips, layout: layout, stream: s, slots: map[int64][]slot{},
		geo: make([]*transform.Geometry, len(clips)), out: make([][]byte, len(clips)),
		data: make([]int, len(clips)), size: make([][2]int, len(clips)), done: map[int64]bool{}}
	for i, cl := range clips {
		if len(cl.Frames) == 0 {
			return nil, fmt.Errorf("%w: clip %d has no frames", ErrRun, i)
		}
		w, h := s.Width, s.Height
		if p != nil {
			g, err := p.Geometry(s.Width, s.Height, cl.Key)
			if err != nil {
				return nil, err
			}
			c.geo[i] = g
			w, h = g.Size()
		}
		c.size[i] = [2]int{w, h}
		var b []byte
		if i < len(dst) {
			b = dst[i]
		}
		b = append(b, transform.NPYHeader(c.shape(i)...)...)
		c.data[i] = len(b)
		b = slices.Grow(b, len(cl.Frames)*w*h*3)
		c.out[i] = b[:len(b)+len(cl.Frames)*w*h*3]
		for t, pts := range cl.Frames {
			c.slots[pts] = append(c.slots[pts], slot{clip: i, t: t})
		}
	}
	return c, nil
}

// Size is the .npy bytes (header and array) clip c of stream s makes
// under pipeline p (nil: the frames as decoded) in layout l: what
// NewClips' Sizes says of it, known from the draws alone, so that a
// caller sizes its outputs before it makes anything.
func Size(p *transform.Pipeline, s Stream, c Clip, l Layout) (int, error) {
	if l == "" {
		l = THWC
	}
	if _, err := ParseLayout(string(l)); err != nil {
		return 0, err
	}
	w, h := s.Width, s.Height
	if p != nil {
		g, err := p.Geometry(s.Width, s.Height, c.Key)
		if err != nil {
			return 0, err
		}
		w, h = g.Size()
	}
	t := len(c.Frames)
	shape := []int{t, h, w, 3}
	switch l {
	case TCHW:
		shape = []int{t, 3, h, w}
	case CTHW:
		shape = []int{3, t, h, w}
	}
	return len(transform.NPYHeader(shape...)) + t*w*h*3, nil
}

// shape is clip i's array shape in the layout.
func (c *Clips) shape(i int) []int {
	t, w, h := len(c.clips[i].Frames), c.size[i][0], c.size[i][1]
	switch c.layout {
	case TCHW:
		return []int{t, 3, h, w}
	case CTHW:
		return []int{3, t, h, w}
	}
	return []int{t, h, w, 3}
}

// Sizes are each clip's .npy bytes (header and array), known before
// anything is decoded: what a caller reserves for the outputs.
func (c *Clips) Sizes() []int {
	n := make([]int, len(c.clips))
	for i := range c.clips {
		n[i] = len(transform.NPYHeader(c.shape(i)...)) + len(c.clips[i].Frames)*c.size[i][0]*c.size[i][1]*3
	}
	return n
}

// Work bounds the memory Put's transforms hold beside the outputs.
func (c *Clips) Work() int64 {
	var most int64
	for _, g := range c.geo {
		if g != nil {
			most = max(most, g.Work())
		}
	}
	return most
}

// Want is every frame the clips name, by PTS, sorted: what Cover plans
// and Decode is asked for.
func (c *Clips) Want() []int64 {
	w := make([]int64, 0, len(c.slots))
	for pts := range c.slots {
		w = append(w, pts)
	}
	slices.Sort(w)
	return w
}

// WantIn is the frames the clips name among the run's packets: what to
// ask Decode for on a run Cover planned.
func (c *Clips) WantIn(run Run) []int64 {
	var w []int64
	for _, p := range run.Packets {
		if _, ok := c.slots[p.PTS]; ok {
			w = append(w, p.PTS)
		}
	}
	return w
}

// Rotation is the stream's display rotation, which the frames are not
// turned by (Stream.Rotation): a client that displays them turns them.
func (c *Clips) Rotation() int { return c.stream.Rotation }

// Put writes a decoded frame into every place a clip names it. A frame
// of another size than the stream's is ErrDecode.
func (c *Clips) Put(f Frame) error {
	if f.Width != c.stream.Width || f.Height != c.stream.Height {
		return fmt.Errorf("%w: a %d×%d frame for a %d×%d stream", ErrDecode, f.Width, f.Height, c.stream.Width, c.stream.Height)
	}
	if c.done[f.PTS] {
		return fmt.Errorf("%w: the frame of pts %d put twice", ErrDecode, f.PTS)
	}
	c.done[f.PTS] = true
	for _, s := range c.slots[f.PTS] {
		pix := f.RGB
		if g := c.geo[s.clip]; g != nil {
			var err error
			if pix, err = g.Apply(&c.sc, f.RGB); err != nil {
				return err
			}
		}
		c.write(s, pix)
	}
	return nil
}

// write copies pix (packed RGB rows of clip s.clip's size) into frame
// s.t of the clip's array in its layout.
func (c *Clips) write(s slot, pix []byte) {
	w, h := c.size[s.clip][0], c.size[s.clip][1]
	n := w * h
	arr := c.out[s.clip][c.data[s.clip]:]
	if c.layout == THWC {
		copy(arr[s.t*n*3:(s.t+1)*n*3], pix)
		return
	}
	T := len(c.clips[s.clip].Frames)
	for ch := range 3 {
		off := (s.t*3 + ch) * n // TCHW
		if c.layout == CTHW {
			off = (ch*T + s.t) * n
		}
		plane := arr[off : off+n]
		for i := range plane {
			plane[i] = pix[i*3+ch]
		}
	}
}

// Out returns the clips' .npy members, after checking every frame of
// every clip was put (ErrDecode naming the first missing one otherwise).
func (c *Clips) Out() ([][]byte, error) {
	for i, cl := range c.clips {
		for _, pts := range cl.Frames {
			if !c.done[pts] {
				return nil, fmt.Errorf("%w: clip %d: its frame of pts %d was not decoded", ErrDecode, i, pts)
			}
		}
	}
	return c.out, nil
}
