package clips

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/internal/seeded"
)

// ErrInvalid marks parameters that cannot make clips of a dataset (a
// clip of no frames, a window a LeRobot dataset has no column for), named
// in the message. It wraps format.ErrInvalid.
var ErrInvalid = fmt.Errorf("clips: %w", format.ErrInvalid)

// domainClips separates the clips' random stream from every other drawn
// from a job's seed (package seeded): the ASCII bytes "brandclp".
const domainClips uint64 = 0x6272616e64636c70

// Limits on the parameters: a clip of more frames than a video has is
// nothing a loader wants, and these keep a request's work bounded.
const (
	MaxFrames = 4096 // frames a clip, or deltas a window
	MaxStride = 1 << 16
	MaxFPS    = 1000.0
)

// Params are a clip job's parameters over a tree of videos.
type Params struct {
	// Frames is the frames a clip holds (clip=T).
	Frames int
	// Stride is the frames between a clip's consecutive frames (stride=);
	// 0 is 1.
	Stride int
	// FPS, when positive, resamples each video to this rate by its
	// timestamps before clips are cut (fps=): frame j of the resampled
	// video is the frame shown j/FPS seconds after the first (variable
	// frame rate honoured; a frame repeats where the video is slower).
	FPS float64
	// Step is the frames between the starts of consecutive segments
	// (step=); 0 is the clip's span, (Frames-1)×Stride+1, so that a
	// video's clips do not overlap. A step of a whole video's length or
	// more is one clip a video an epoch.
	Step int
	// Fixed starts each clip at its segment's first frame; otherwise the
	// start is drawn uniformly within the segment, anew each epoch.
	Fixed bool
}

// span is the frames of the (resampled) video a clip covers.
func (p Params) span() int { return (p.Frames-1)*p.Stride + 1 }

// Check reports whether p can make clips, with the defaults filled in.
func (p Params) Check() (Params, error) {
	if p.Stride == 0 {
		p.Stride = 1
	}
	switch {
	case p.Frames < 1 || p.Frames > MaxFrames:
		return p, fmt.Errorf("%w: clip=%d: a clip holds 1 to %d frames", ErrInvalid, p.Frames, MaxFrames)
	case p.Stride < 1 || p.Stride > MaxStride:
		return p, fmt.Errorf("%w: stride=%d: 1 to %d", ErrInvalid, p.Stride, MaxStride)
	case p.FPS < 0 || p.FPS > MaxFPS || math.IsNaN(p.FPS):
		return p, fmt.Errorf("%w: fps=%v: 0 (the videos' own frames) or up to %v", ErrInvalid, p.FPS, MaxFPS)
	case p.Step < 0:
		return p, fmt.Errorf("%w: step=%d", ErrInvalid, p.Step)
	}
	if p.Step == 0 {
		p.Step = p.span()
	}
	return p, nil
}

// Frame is one frame of a clip.
type Frame struct {
	// Video is the file (an index in Dataset.Videos), Frame its frame (an
	// index in the track's Frames, presentation order) and Sample that
	// frame's sample (decode order).
	Video, Frame, Sample int
	// PTS is the frame's timestamp in its track's timescale, Seconds in
	// seconds.
	PTS     int64
	Seconds float64
	// Pad marks a LeRobot frame outside its episode, which is the
	// episode's first or last instead ({key}_is_pad).
	Pad bool
}

// GOP names a GOP of a video.
type GOP struct{ Video, GOP int }

// Clip is one sample of a clip job: what to decode and where it is.
type Clip struct {
	// Sample is the sample's number in the job's space (Space.Samples).
	Sample int
	// Unit is the unit the sample belongs to (Space.Counts).
	Unit int
	// Video and Label are a tree's clip's video and its label (-1 none);
	// Segment its segment's number in the video (from 0).
	Video, Label, Segment int
	// Frames are the clip's frames in order (a tree's clip).
	Frames []Frame
	// Row and Episode are a LeRobot sample's anchor row (global index)
	// and its episode (an index in LeRobot.Episodes); Streams its
	// windows, in Space.Windows' order.
	Row, Episode int
	Streams      []Stream
	// GOPs are every GOP the sample's frames need decoded, by video then
	// decode order: each frame's, and for a frame shown before its GOP's
	// sync sample (an open GOP) the one before.
	GOPs []GOP
	// Chunks are the layout's chunks holding those GOPs, ascending; a
	// LeRobot sample's rows' chunks too.
	Chunks []int
}

// Stream is one window of a LeRobot sample: a key's rows (and a camera's
// frames) at the window's offsets around the anchor.
type Stream struct {
	Key    string
	Camera bool
	// Rows are the rows at the offsets (global indexes), clamped to the
	// episode; Pad marks those clamped.
	Rows []int
	Pad  []bool
	// Frames are a camera's frames: at each row's timestamp, the frame of
	// the episode's span of the camera's file shown nearest to it.
	Frames []Frame
}

// Space is a clip job's samples over a dataset: their number, their
// units and each one's clip. It holds only what was computed from the
// description and the parameters, so every replica computes the same
// Space; Clip is a pure function of it and (seed, epoch, sample).
type Space struct {
	d       *video.Dataset
	p       Params
	windows []Window
	// A tree: the samples of each video start at first[v]; unit[n] is
	// built by counts.
	first  []int
	length []int // each video's frames after resampling
	counts []int // per unit
	unitOf []int // per sample: its unit (a tree's)
	tol    float64
}

// Samples is the number of samples an epoch holds.
func (s *Space) Samples() int {
	if s.d.LeRobot != nil {
		return s.d.LeRobot.Rows
	}
	return s.first[len(s.first)-1]
}

// Counts are each unit's samples, in unit order, numbering the samples
// unit by unit (sample n is the n-th of that order): what
// shuffle.NewEpoch permutes. A tree's units are the layout's video
// chunks (a segment belongs to the chunk of the GOP its first frame is
// in); a LeRobot dataset's are its episodes. The slice is shared.
func (s *Space) Counts() []int { return s.counts }

// New is the space of clip job p over a tree of videos: each video's
// frames (resampled to p.FPS) are cut into segments of p.Step frames
// from its first, as many as hold a clip's start (a video shorter than a
// clip has none), and each segment is a sample.
func New(d *video.Dataset, p Params) (*Space, error) {
	if d.LeRobot != nil {
		return nil, fmt.Errorf("%w: a LeRobot dataset's samples are its rows (NewLeRobot)", ErrInvalid)
	}
	p, err := p.Check()
	if err != nil {
		return nil, err
	}
	s := &Space{d: d, p: p, first: make([]int, 1, len(d.Videos)+1), counts: make([]int, len(d.Chunks))}
	for v := range d.Videos {
		n := s.frames(v)
		s.length = append(s.length, n)
		k := 0
		if starts := n - p.span() + 1; starts > 0 {
			k = (starts + p.Step - 1) / p.Step
		}
		for seg := range k {
			c := s.chunkOfFrame(v, s.source(v, seg*p.Step))
			s.counts[c]++
			s.unitOf = append(s.unitOf, c)
		}
		s.first = append(s.first, s.first[v]+k)
	}
	if s.Samples() == 0 {
		return nil, fmt.Errorf("%w: no video holds a clip of %d frames (a span of %d)", ErrInvalid, p.Frames, p.span())
	}
	return s, nil
}

// Length is video v's frames after resampling (Params.FPS): the frames
// its clips are drawn from. A tree's.
func (s *Space) Length(v int) int { return s.length[v] }

// VideoOf is the video of a tree's sample n (0 ≤ n < Samples()).
func (s *Space) VideoOf(n int) int {
	return sort.Search(len(s.first)-1, func(v int) bool { return s.first[v+1] > n })
}

// First is the first sample of video v of a tree: its samples are
// [First(v), First(v+1)), none when equal.
func (s *Space) First(v int) int { return s.first[v] }

// frames is video v's frames after resampling.
func (s *Space) frames(v int) int {
	t := &s.d.Videos[v].Track
	if s.p.FPS <= 0 {
		return len(t.Frames)
	}
	d := float64(t.Frames[len(t.Frames)-1].PTS-t.Frames[0].PTS) / float64(t.Timescale)
	return int(math.Floor(d*s.p.FPS+1e-9)) + 1
}

// source is the video's frame (presentation order) of resampled frame j:
// j itself without FPS, else the last frame shown at or before j/FPS
// seconds after the first (within half a tick of the timescale).
func (s *Space) source(v, j int) int {
	if s.p.FPS <= 0 {
		return j
	}
	t := &s.d.Videos[v].Track
	at := float64(t.Frames[0].PTS) + float64(j)*float64(t.Timescale)/s.p.FPS + 0.5
	i := sort.Search(len(t.Frames), func(i int) bool { return float64(t.Frames[i].PTS) > at })
	return max(i-1, 0)
}

// chunkOfFrame is the layout chunk of frame f of video v.
func (s *Space) chunkOfFrame(v, f int) int {
	return s.d.ChunkOf(v, int(s.d.Videos[v].Track.Frames[f].GOP))
}

// Clip is sample n of an epoch: a pure function of the space, seed,
// epoch and n.
func (s *Space) Clip(seed, epoch uint64, n int) (Clip, error) {
	if n < 0 || n >= s.Samples() {
		return Clip{}, fmt.Errorf("%w: sample %d of %d", ErrInvalid, n, s.Samples())
	}
	if s.d.LeRobot != nil {
		return s.anchor(n)
	}
	v := s.VideoOf(n)
	seg := n - s.first[v]
	a := seg * s.p.Step
	starts := s.length[v] - s.p.span() + 1
	start := a
	if l := min(s.p.Step, starts-a); !s.p.Fixed && l > 1 {
		r := seeded.New(seed, epoch, domainClips, uint64(n))
		start += int(r.Bounded(uint64(l)))
	}
	c := Clip{Sample: n, Unit: s.unitOf[n], Video: v, Label: s.d.Videos[v].Label, Segment: seg, Row: -1, Episode: -1}
	for i := range s.p.Frames {
		c.Frames = append(c.Frames, s.frame(v, s.source(v, start+i*s.p.Stride), false))
	}
	c.GOPs = s.gops(nil, c.Frames)
	c.Chunks = s.chunks(nil, c.GOPs)
	return c, nil
}

// frame describes frame f of video v.
func (s *Space) frame(v, f int, pad bool) Frame {
	t := &s.d.Videos[v].Track
	fr := t.Frames[f]
	return Frame{Video: v, Frame: f, Sample: int(fr.Sample), PTS: fr.PTS, Seconds: t.Seconds(fr.PTS), Pad: pad}
}

// gops appends the GOPs frames need, sorted and without repeats.
func (s *Space) gops(dst []GOP, frames []Frame) []GOP {
	for _, f := range frames {
		t := &s.d.Videos[f.Video].Track
		g := int(t.Frames[f.Frame].GOP)
		dst = append(dst, GOP{f.Video, g})
		if g > 0 && t.GOPs[g].Leading && f.PTS < t.Samples[t.GOPs[g].First].PTS {
			dst = append(dst, GOP{f.Video, g - 1})
		}
	}
	slices.SortFunc(dst, func(a, b GOP) int {
		if a.Video != b.Video {
			return a.Video - b.Video
		}
		return a.GOP - b.GOP
	})
	return slices.Compact(dst)
}

// chunks appends the layout chunks of gops, sorted, without repeats.
func (s *Space) chunks(dst []int, gops []GOP) []int {
	for _, g := range gops {
		dst = append(dst, s.d.ChunkOf(g.Video, g.GOP))
	}
	slices.Sort(dst)
	return slices.Compact(dst)
}

// Ranges are the bytes of video v that gops (of that video) cover, merged
// where adjacent: what reading a clip's GOPs from its file costs.
func Ranges(d *video.Dataset, gops []GOP) map[int][]format.Range {
	out := map[int][]format.Range{}
	for _, g := range gops {
		out[g.Video] = append(out[g.Video], d.Videos[g.Video].Track.GOPs[g.GOP].Ranges...)
	}
	for v, rs := range out {
		out[v] = format.Merge(rs)
	}
	return out
}

// Reach returns the layout chunks any clip of sample n may need, in any
// epoch: a tree's sample's whole segment's (wherever its clip starts in
// it), a LeRobot sample's own (it has no randomness). A planner sums
// them over a window's samples before any clip is drawn.
func (s *Space) Reach(n int) ([]int, error) {
	if n < 0 || n >= s.Samples() {
		return nil, fmt.Errorf("%w: sample %d of %d", ErrInvalid, n, s.Samples())
	}
	if s.d.LeRobot != nil {
		c, err := s.anchor(n)
		return c.Chunks, err
	}
	v := sort.Search(len(s.first)-1, func(v int) bool { return s.first[v+1] > n })
	a := (n - s.first[v]) * s.p.Step
	last := min(a+s.p.Step-1, s.length[v]-s.p.span()) + s.p.span() - 1
	t := &s.d.Videos[v].Track
	lo, hi := int(t.Frames[s.source(v, a)].GOP), int(t.Frames[s.source(v, last)].GOP)
	if lo > 0 && t.GOPs[lo].Leading {
		lo--
	}
	var out []int
	for c := s.d.ChunkOf(v, lo); c <= s.d.ChunkOf(v, hi); c++ {
		out = append(out, c)
	}
	return out, nil
}

// UnitChunks returns the layout chunks the samples of unit u may need
// (Reach's, together), ascending.
func (s *Space) UnitChunks(u int) ([]int, error) {
	if u < 0 || u >= len(s.counts) {
		return nil, fmt.Errorf("%w: unit %d of %d", ErrInvalid, u, len(s.counts))
	}
	first := 0
	for _, n := range s.counts[:u] {
		first += n
	}
	var out []int
	for n := first; n < first+s.counts[u]; n++ {
		r, err := s.Reach(n)
		if err != nil {
			return nil, err
		}
		out = append(out, r...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
