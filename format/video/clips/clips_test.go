package clips

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/internal/testsupport/videotest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from the current implementation")

// tree is a tree of the small ffmpeg-written files of ../mp4/testdata
// (20 frames at 10 fps, a keyframe every 10, B-frames; one cut with an
// edit list, one fragmented), in class folders, cut into chunks of
// 1,500 bytes so that clips cross chunks.
func tree(t testing.TB) *video.Dataset {
	t.Helper()
	st := decodetest.NewStore()
	for key, file := range map[string]string{
		"a/x.mp4": "bframes.mp4", "a/y.mp4": "cut.mp4", "b/z.mp4": "fragmented.mp4",
	} {
		b, err := os.ReadFile("../mp4/testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		st.Objs[key] = b
	}
	d, _, err := video.IndexFiles(context.Background(), st, st.List(), format.Options{ChunkBytes: 1500})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// lerobot is a small LeRobot description made by hand around the
// bframes file: two episodes of 10 rows, one camera, its GOPs one an
// episode.
func lerobot(t testing.TB) *video.Dataset {
	t.Helper()
	d := tree(t)
	v := d.Videos[0]
	v.Camera = "cam"
	v.Label = -1
	v.Chunks = [2]int{0, 2}
	d = &video.Dataset{Kind: "lerobot", Videos: []video.Video{v}, Chunks: []video.Chunk{{Video: 0, First: 0, End: 1, Unit: 0}, {Video: 0, First: 1, End: 2, Unit: 1}}}
	l := &video.LeRobot{Version: "v3.0", FPS: 10, Cameras: []string{"cam"}, Columns: []string{"action", "timestamp"}, Rows: 20, RowChunks: 1,
		DataFiles: []video.DataFile{{Key: "data/chunk-000/file-000.parquet", FirstRow: 0, Rows: 20, Chunks: [2]int{0, 1}, ChunkRows: []int{20}}}}
	for e := range 2 {
		l.Episodes = append(l.Episodes, video.Episode{Index: e, From: 10 * e, To: 10*e + 10,
			Videos: []video.EpisodeVideo{{Video: 0, From: float64(e), To: float64(e + 1), Chunks: [2]int{e, e + 1}}}})
		for i := range 10 {
			l.Timestamps = append(l.Timestamps, float32(float64(i)/10))
		}
	}
	d.LeRobot = l
	return d
}

// summary is a clip as the golden file pins it.
type summary struct {
	Sample, Unit, Video, Label int
	Frames                     []int   `json:",omitempty"`
	PTS                        []int64 `json:",omitempty"`
	Row, Episode               int
	Streams                    []streamSummary `json:",omitempty"`
	GOPs                       [][2]int
	Chunks                     []int
}

type streamSummary struct {
	Key    string
	Rows   []int
	Pad    []bool
	Frames []int `json:",omitempty"`
}

func summarize(c Clip) summary {
	s := summary{Sample: c.Sample, Unit: c.Unit, Video: c.Video, Label: c.Label, Row: c.Row, Episode: c.Episode, Chunks: c.Chunks}
	for _, f := range c.Frames {
		s.Frames = append(s.Frames, f.Frame)
		s.PTS = append(s.PTS, f.PTS)
	}
	for _, g := range c.GOPs {
		s.GOPs = append(s.GOPs, [2]int{g.Video, g.GOP})
	}
	for _, st := range c.Streams {
		ss := streamSummary{Key: st.Key, Rows: st.Rows, Pad: st.Pad}
		for _, f := range st.Frames {
			ss.Frames = append(ss.Frames, f.Frame)
		}
		s.Streams = append(s.Streams, ss)
	}
	return s
}

type goldenCase struct {
	Name    string
	Params  Params   `json:",omitempty"`
	Windows []Window `json:",omitempty"`
	Samples int
	Counts  []int
	Epochs  map[string][]summary // "seed/epoch" → every sample's clip
}

// TestGolden pins every clip of every sample for several parameters,
// seeds and epochs: a change to how clips are drawn shows as a diff (go
// test -run TestGolden -update rewrites testdata/golden.json).
func TestGolden(t *testing.T) {
	files, lr := tree(t), lerobot(t)
	cases := []goldenCase{
		{Name: "4 frames, stride 2", Params: Params{Frames: 4, Stride: 2}},
		{Name: "3 frames, every start", Params: Params{Frames: 3, Step: 1, Fixed: true}},
		{Name: "5 frames at 4 fps", Params: Params{Frames: 5, FPS: 4}},
		{Name: "2 frames, one clip a video", Params: Params{Frames: 2, Step: 1000}},
		{Name: "LeRobot: the camera around the anchor, actions ahead", Windows: []Window{{Key: "cam", Deltas: []float64{-0.2, 0, 0.1}}, {Key: "action", Deltas: []float64{0, 0.1, 0.2, 0.3}}}},
		{Name: "LeRobot: the anchor alone"},
	}
	for i := range cases {
		tc := &cases[i]
		var s *Space
		var err error
		if strings.HasPrefix(tc.Name, "LeRobot") {
			s, err = NewLeRobot(lr, tc.Windows, 0)
		} else {
			s, err = New(files, tc.Params)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.Name, err)
		}
		tc.Samples, tc.Counts = s.Samples(), s.Counts()
		tc.Epochs = map[string][]summary{}
		for _, se := range [][2]uint64{{7, 0}, {7, 1}, {8, 0}} {
			var out []summary
			for n := range s.Samples() {
				c, err := s.Clip(se[0], se[1], n)
				if err != nil {
					t.Fatalf("%s sample %d: %v", tc.Name, n, err)
				}
				out = append(out, summarize(c))
			}
			tc.Epochs[fmt.Sprintf("%d/%d", se[0], se[1])] = out
		}
	}
	got, err := json.MarshalIndent(cases, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile("testdata/golden.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("clips differ from testdata/golden.json (go test -run TestGolden -update rewrites it)")
	}
}

// TestClipsProperties: over many parameters, every clip is T frames of
// its video in order at the stride (resampled at FPS: timestamps
// ascending at about 1/FPS), starts in its segment, and needs exactly the
// GOPs of its frames (and the one before a leading frame's), in the
// chunks it names; the counts number the samples unit by unit.
func TestClipsProperties(t *testing.T) {
	d := tree(t)
	for _, p := range []Params{
		{Frames: 1}, {Frames: 4, Stride: 2}, {Frames: 8, Stride: 1}, {Frames: 3, Step: 1}, {Frames: 3, Step: 7, Fixed: true},
		{Frames: 5, FPS: 4}, {Frames: 4, FPS: 25}, {Frames: 2, Step: 1000}, {Frames: 20},
	} {
		s, err := New(d, p)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		q, _ := p.Check()
		var total int
		for _, n := range s.Counts() {
			total += n
		}
		if total != s.Samples() {
			t.Fatalf("%+v: counts of %d samples, %d in the space", p, total, s.Samples())
		}
		unit := 0
		seen := 0
		for n := range s.Samples() {
			for seen+s.Counts()[unit] <= n {
				seen += s.Counts()[unit]
				unit++
			}
			for epoch := range uint64(3) {
				c, err := s.Clip(42, epoch, n)
				if err != nil {
					t.Fatal(err)
				}
				if c.Unit != unit {
					t.Fatalf("%+v sample %d: unit %d, the counts make it %d", p, n, c.Unit, unit)
				}
				if len(c.Frames) != q.Frames {
					t.Fatalf("%+v sample %d: %d frames", p, n, len(c.Frames))
				}
				tr := &d.Videos[c.Video].Track
				for i, f := range c.Frames {
					if f.Video != c.Video || tr.Frames[f.Frame].PTS != f.PTS || int(tr.Frames[f.Frame].Sample) != f.Sample {
						t.Fatalf("%+v sample %d frame %d: %+v", p, n, i, f)
					}
					if i == 0 {
						continue
					}
					prev := c.Frames[i-1]
					switch {
					case q.FPS == 0 && f.Frame != prev.Frame+q.Stride:
						t.Fatalf("%+v sample %d: frames %d then %d", p, n, prev.Frame, f.Frame)
					case q.FPS > 0 && (f.Seconds < prev.Seconds || f.Seconds-prev.Seconds > float64(q.Stride)/q.FPS+0.1001):
						t.Fatalf("%+v sample %d: %v s then %v s", p, n, prev.Seconds, f.Seconds)
					}
				}
				want := map[GOP]bool{}
				for _, f := range c.Frames {
					g := int(tr.Frames[f.Frame].GOP)
					want[GOP{c.Video, g}] = true
					if g > 0 && tr.GOPs[g].Leading && f.PTS < tr.Samples[tr.GOPs[g].First].PTS {
						want[GOP{c.Video, g - 1}] = true
					}
				}
				if len(want) != len(c.GOPs) {
					t.Fatalf("%+v sample %d: GOPs %v", p, n, c.GOPs)
				}
				for _, g := range c.GOPs {
					if !want[g] {
						t.Fatalf("%+v sample %d: GOP %v not needed", p, n, g)
					}
					ch := d.ChunkOf(g.Video, g.GOP)
					if !contains(c.Chunks, ch) || d.Chunks[ch].First > g.GOP || d.Chunks[ch].End <= g.GOP {
						t.Fatalf("%+v sample %d: GOP %v in chunk %d, not among %v", p, n, g, ch, c.Chunks)
					}
				}
			}
		}
	}
}

func contains(s []int, x int) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// TestJitter: a segment's clips start anywhere in it over epochs, the
// same for a seed and epoch, and otherwise differ.
func TestJitter(t *testing.T) {
	s, err := New(tree(t), Params{Frames: 2, Step: 10})
	if err != nil {
		t.Fatal(err)
	}
	starts := map[int]bool{}
	for epoch := range uint64(200) {
		a, _ := s.Clip(1, epoch, 0)
		b, _ := s.Clip(1, epoch, 0)
		if a.Frames[0] != b.Frames[0] {
			t.Fatal("not a function of seed, epoch and sample")
		}
		starts[a.Frames[0].Frame] = true
	}
	if len(starts) != 10 {
		t.Errorf("over 200 epochs the clip started at %d of the segment's 10 frames", len(starts))
	}
}

func TestParamsRefused(t *testing.T) {
	d := tree(t)
	for _, tc := range []struct {
		p    Params
		says string
	}{
		{Params{}, "clip=0"},
		{Params{Frames: 5000}, "clip=5000"},
		{Params{Frames: 2, Stride: -1}, "stride=-1"},
		{Params{Frames: 2, FPS: math.NaN()}, "fps=NaN"},
		{Params{Frames: 2, Step: -3}, "step=-3"},
		{Params{Frames: 200}, "no video holds a clip of 200 frames"},
	} {
		if _, err := New(d, tc.p); err == nil || !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v; want %q", tc.p, err, tc.says)
		}
	}
	lr := lerobot(t)
	for _, tc := range []struct {
		w    []Window
		says string
	}{
		{[]Window{{Key: "nope", Deltas: []float64{0}}}, `a window of "nope"`},
		{[]Window{{Key: "cam", Deltas: []float64{0.05}}}, "not a whole number of frames"},
		{[]Window{{Key: "cam", Deltas: nil}}, "0 offsets"},
		{[]Window{{Key: "cam", Deltas: []float64{0}}, {Key: "cam", Deltas: []float64{0}}}, "twice"},
	} {
		if _, err := NewLeRobot(lr, tc.w, 0); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v; want %q", tc.w, err, tc.says)
		}
	}
}

// TestLeRobotWindows draws every sample of the LeRobot fixture (built as
// LeRobot builds a dataset, format/video's TestLeRobot) with windows on
// both cameras and a column, and checks each as LeRobotDataset computes
// it: rows at round(offset × fps) from the anchor, clamped to the
// episode and marked padded; each camera frame shown within LeRobot's
// tolerance of the episode's start in its file plus its row's timestamp;
// the GOPs and chunks its frames and rows need.
func TestLeRobotWindows(t *testing.T) {
	fx := videotest.LeRobot(t, "../../..", 0)
	st := decodetest.LoadDir(t, fx.Dir)
	lay, err := video.LeRobotFormat{}.Index(context.Background(), st, st.List(), format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := video.LeRobotFormat{}.Open(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	d := dec.(*video.Decoder).Dataset()
	l := d.LeRobot
	windows := []Window{
		{Key: videotest.CamFront, Deltas: []float64{-0.3, -0.1, 0}},
		{Key: videotest.CamWrist, Deltas: []float64{0, 0.5}},
		{Key: "action", Deltas: []float64{0, 0.1, 0.2, 1.0}},
	}
	s, err := NewLeRobot(d, windows, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.Samples() != l.Rows || len(s.Counts()) != len(l.Episodes) {
		t.Fatalf("%d samples in %d units", s.Samples(), len(s.Counts()))
	}
	for n := range s.Samples() {
		c, err := s.Clip(3, 0, n)
		if err != nil {
			t.Fatal(err)
		}
		ep := l.Episodes[c.Episode]
		if c.Row != n || n < ep.From || n >= ep.To || c.Unit != c.Episode {
			t.Fatalf("sample %d: row %d of episode %d [%d, %d)", n, c.Row, c.Episode, ep.From, ep.To)
		}
		chunk, _, _ := l.Row(n)
		if !contains(c.Chunks, chunk) {
			t.Fatalf("sample %d: the anchor's chunk %d is not among %v", n, chunk, c.Chunks)
		}
		for i, w := range windows {
			st := c.Streams[i]
			for j, dt := range w.Deltas {
				q := n + int(math.Round(dt*10))
				pad := q < ep.From || q >= ep.To
				q = max(ep.From, min(ep.To-1, q))
				if st.Rows[j] != q || st.Pad[j] != pad {
					t.Fatalf("sample %d %s offset %v: row %d pad %v, want %d %v", n, w.Key, dt, st.Rows[j], st.Pad[j], q, pad)
				}
				if !st.Camera {
					if ch, _, _ := l.Row(q); !contains(c.Chunks, ch) {
						t.Fatalf("sample %d: row %d's chunk %d not among %v", n, q, ch, c.Chunks)
					}
					continue
				}
				k := 0
				if w.Key == videotest.CamWrist {
					k = 1
				}
				ev := ep.Videos[k]
				f := st.Frames[j]
				if f.Video != ev.Video || math.Abs(f.Seconds-(ev.From+float64(l.Timestamps[q]))) > DefaultTolerance || f.Pad != pad {
					t.Fatalf("sample %d %s offset %v: frame at %v s of video %d, want %v s of %d", n, w.Key, dt, f.Seconds, f.Video, ev.From+float64(l.Timestamps[q]), ev.Video)
				}
				g := int(d.Videos[f.Video].Track.Frames[f.Frame].GOP)
				if !containsGOP(c.GOPs, GOP{f.Video, g}) || !contains(c.Chunks, d.ChunkOf(f.Video, g)) {
					t.Fatalf("sample %d: frame %d's GOP %d or its chunk missing", n, f.Frame, g)
				}
			}
		}
	}
}

func containsGOP(s []GOP, g GOP) bool {
	for _, x := range s {
		if x == g {
			return true
		}
	}
	return false
}

// TestReach: whatever the epoch, a clip's chunks are within its sample's
// reach, and a unit's chunks hold its samples' reaches.
func TestReach(t *testing.T) {
	d := tree(t)
	for _, p := range []Params{{Frames: 4, Stride: 2}, {Frames: 2, Step: 1000}, {Frames: 5, FPS: 4}} {
		s, err := New(d, p)
		if err != nil {
			t.Fatal(err)
		}
		for n := range s.Samples() {
			reach, err := s.Reach(n)
			if err != nil {
				t.Fatal(err)
			}
			for epoch := range uint64(20) {
				c, _ := s.Clip(5, epoch, n)
				for _, ch := range c.Chunks {
					if !contains(reach, ch) {
						t.Fatalf("%+v sample %d epoch %d: chunk %d outside its reach %v", p, n, epoch, ch, reach)
					}
				}
				u, err := s.UnitChunks(c.Unit)
				if err != nil {
					t.Fatal(err)
				}
				for _, ch := range reach {
					if !contains(u, ch) {
						t.Fatalf("%+v sample %d: chunk %d of its reach not in unit %d's %v", p, n, ch, c.Unit, u)
					}
				}
			}
		}
	}
}
