package clips

import (
	"fmt"
	"math"
	"slices"

	"github.com/brandgw/brand/format/video"
)

// DefaultTolerance is LeRobot's tolerance_s: how far a frame may be from
// the time a row asks for.
const DefaultTolerance = 1e-4

// Window is one entry of LeRobot's delta_timestamps: a key (a camera or a
// column) and the offsets, in seconds, of the rows it reads around the
// anchor row.
type Window struct {
	Key    string
	Deltas []float64
}

// NewLeRobot is the space of a LeRobot dataset's samples: one a row (the
// anchor frame), numbered by global index, in units of episodes. Each
// window reads its key at the anchor's time plus each of its offsets,
// which must be whole frames at the dataset's rate (within tol seconds,
// as LeRobot's check_delta_timestamps requires); a camera without a
// window reads its frame at the anchor's time. tol 0 is DefaultTolerance.
func NewLeRobot(d *video.Dataset, windows []Window, tol float64) (*Space, error) {
	l := d.LeRobot
	if l == nil {
		return nil, fmt.Errorf("%w: not a LeRobot dataset", ErrInvalid)
	}
	if tol <= 0 {
		tol = DefaultTolerance
	}
	s := &Space{d: d, tol: tol}
	have := map[string]bool{}
	for _, w := range windows {
		if have[w.Key] {
			return nil, fmt.Errorf("%w: the window of %q twice", ErrInvalid, w.Key)
		}
		have[w.Key] = true
		if !slices.Contains(l.Cameras, w.Key) && !slices.Contains(l.Columns, w.Key) {
			return nil, fmt.Errorf("%w: a window of %q: the dataset's cameras are %v, its columns %v", ErrInvalid, w.Key, l.Cameras, l.Columns)
		}
		if len(w.Deltas) == 0 || len(w.Deltas) > MaxFrames {
			return nil, fmt.Errorf("%w: the window of %q has %d offsets (1 to %d)", ErrInvalid, w.Key, len(w.Deltas), MaxFrames)
		}
		for _, dt := range w.Deltas {
			x := dt * float64(l.FPS)
			if math.IsNaN(x) || math.Abs(x) > 1<<30 || math.Abs(x-math.RoundToEven(x))/float64(l.FPS) > tol {
				return nil, fmt.Errorf("%w: the window of %q has an offset of %v s, not a whole number of frames at %d fps (within %g s)", ErrInvalid, w.Key, dt, l.FPS, tol)
			}
		}
		s.windows = append(s.windows, w)
	}
	for _, cam := range l.Cameras {
		if !have[cam] {
			s.windows = append(s.windows, Window{Key: cam, Deltas: []float64{0}})
		}
	}
	for _, e := range l.Episodes {
		s.counts = append(s.counts, e.To-e.From)
	}
	if l.Rows == 0 {
		return nil, fmt.Errorf("%w: the dataset has no rows", ErrInvalid)
	}
	return s, nil
}

// Windows are the space's windows: the job's, then a window of the
// anchor alone for each camera the job gave none.
func (s *Space) Windows() []Window { return s.windows }

// anchor is LeRobot sample n: the rows and frames of each window around
// row n, as LeRobotDataset's __getitem__ computes them (_get_query_indices,
// _get_query_timestamps, decode_video_frames): each offset's row is the
// anchor's plus round(offset × fps), clamped to the episode and marked
// padded when clamped; a camera's frame for a row is the one shown
// nearest to the episode's start in the file plus the row's timestamp.
func (s *Space) anchor(n int) (Clip, error) {
	d := s.d
	l := d.LeRobot
	e := l.EpisodeOf(n)
	if e < 0 {
		return Clip{}, fmt.Errorf("%w: row %d is in no episode", ErrInvalid, n)
	}
	ep := l.Episodes[e]
	c := Clip{Sample: n, Unit: e, Video: -1, Label: -1, Row: n, Episode: e}
	var rows []int
	if ch, _, ok := l.Row(n); ok {
		rows = append(rows, ch)
	}
	for _, w := range s.windows {
		st := Stream{Key: w.Key}
		k := slices.Index(l.Cameras, w.Key)
		st.Camera = k >= 0
		for _, dt := range w.Deltas {
			q := n + int(math.RoundToEven(dt*float64(l.FPS)))
			st.Pad = append(st.Pad, q < ep.From || q >= ep.To)
			q = max(ep.From, min(ep.To-1, q))
			st.Rows = append(st.Rows, q)
			if !st.Camera {
				if ch, _, ok := l.Row(q); ok {
					rows = append(rows, ch)
				}
				continue
			}
			ev := ep.Videos[k]
			t := ev.From + float64(l.Timestamps[q])
			f, dist := d.NearestFrame(ev.Video, t)
			if f < 0 || dist > s.tol {
				return Clip{}, fmt.Errorf("%w: row %d, camera %s: no frame within %g s of %.6f s", ErrInvalid, q, w.Key, s.tol, t)
			}
			st.Frames = append(st.Frames, s.frame(ev.Video, f, st.Pad[len(st.Pad)-1]))
		}
		c.GOPs = s.gops(c.GOPs, st.Frames)
		c.Streams = append(c.Streams, st)
	}
	c.Chunks = s.chunks(rows, c.GOPs)
	return c, nil
}
