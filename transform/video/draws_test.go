package video

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/pythontest"
	"github.com/brandgw/brand/transform"
)

var update = flag.Bool("update", false, "rewrite testdata/clip_draws.json from the Go implementation")

const drawsPath = "testdata/clip_draws.json"

// clipDraw is one clip's geometry: the draws of its key on frames of its
// stream's size, made once and applied to every frame.
type clipDraw struct {
	Pipeline string                  `json:"pipeline"`
	Width    int                     `json:"width"`
	Height   int                     `json:"height"`
	JobSeed  uint64                  `json:"job_seed"`
	Dataset  string                  `json:"dataset"`
	Epoch    uint64                  `json:"epoch"`
	Sample   uint64                  `json:"sample"`
	Draws    transform.GeometryDraws `json:"draws"`
	Out      [2]int                  `json:"out"`
}

// clipPipelines are the pipelines the golden clips are drawn with.
func clipPipelines(t *testing.T) map[string]*transform.Pipeline {
	cfg, err := transform.ParseConfig([]byte(`{"pipelines": {
		"video-train": {"ops": [{"op": "random_resized_crop", "size": 224, "scale": [0.08, 1]}, {"op": "hflip"}]},
		"video-eval": {"ops": [{"op": "resize", "size": 256}, {"op": "center_crop", "size": 224}]},
		"lerobot-crop": {"ops": [{"op": "random_resized_crop", "size": [84, 84], "scale": [0.9, 1], "ratio": [1, 1]}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := transform.NewSet(cfg, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*transform.Pipeline{}
	for _, n := range []string{"video-train", "video-eval", "lerobot-crop", transform.ImagenetTrain} {
		if out[n], err = set.Get(n); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func computeClipDraws(t *testing.T) []clipDraw {
	ps := clipPipelines(t)
	var out []clipDraw
	for _, name := range []string{"video-train", "video-eval", "lerobot-crop", transform.ImagenetTrain} {
		for _, size := range [][2]int{{640, 360}, {1920, 1080}, {176, 100}, {360, 640}} {
			for _, k := range []struct {
				seed          uint64
				epoch, sample uint64
			}{{7, 0, 0}, {7, 0, 1}, {7, 3, 12345}, {1<<64 - 1, 1, 99}} {
				key := transform.SampleKey(k.seed, "episodes", k.epoch, k.sample)
				g, err := ps[name].Geometry(size[0], size[1], key)
				if err != nil {
					t.Fatal(err)
				}
				w, h := g.Size()
				out = append(out, clipDraw{Pipeline: name, Width: size[0], Height: size[1], JobSeed: k.seed, Dataset: "episodes",
					Epoch: k.epoch, Sample: k.sample, Draws: g.Draws(), Out: [2]int{w, h}})
			}
		}
	}
	return out
}

// TestClipDrawsGolden pins the clips' geometry — each clip's crop box,
// size and flip, drawn once from transform.SampleKey of its sample by the
// transform package's draws — at video sizes (docs/transform.md §12).
func TestClipDrawsGolden(t *testing.T) {
	got, err := json.MarshalIndent(computeClipDraws(t), "", " ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(drawsPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(drawsPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the clip draws differ from %s (rerun with -update only for a deliberate, documented change)", drawsPath)
	}
}

// TestClipsDrawOnce: every clip of a Clips has its own geometry from its
// own key, the same for all its frames, and equal to the Geometry of its
// key: two clips of one key draw alike, clips of other samples apart.
func TestClipsDrawOnce(t *testing.T) {
	p := clipPipelines(t)["video-train"]
	s := Stream{Codec: "h264", Width: 640, Height: 360}
	var clips []Clip
	for i := range 6 {
		clips = append(clips, Clip{Frames: []int64{0, 512, 1024}, Key: transform.SampleKey(7, "episodes", 0, uint64(i%3))})
	}
	c, err := NewClips(p, s, clips, THWC, nil)
	if err != nil {
		t.Fatal(err)
	}
	boxes := map[transform.Rect]bool{}
	for i, cl := range clips {
		g, _ := p.Geometry(640, 360, cl.Key)
		if got, want := c.geo[i].Draws(), g.Draws(); !jsonEqual(got, want) {
			t.Fatalf("clip %d: %+v, its key draws %+v", i, got, want)
		}
		if !jsonEqual(c.geo[i].Draws(), c.geo[i%3].Draws()) {
			t.Fatalf("clips %d and %d of one key draw apart", i, i%3)
		}
		boxes[c.geo[i].Draws().Crops[0]] = true
	}
	if len(boxes) != 3 {
		t.Fatalf("%d distinct boxes for 3 keys", len(boxes))
	}
	if n := c.Sizes()[0]; n != 128+3*224*224*3 {
		t.Fatalf("a (3, 224, 224, 3) clip's .npy: %d bytes", n)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestClipDrawsReference has python/brand/transform.py, the reference
// written from docs/transform.md, recompute the golden clips' random
// crops and flips from their sample keys.
func TestClipDrawsReference(t *testing.T) {
	python := pythontest.Need(t, "")
	cmd := exec.Command(python, "testdata/reference_clips.py")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join("..", "..", "python"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "checked 48") {
		t.Fatalf("reference_clips.py: %v\n%s", err, out)
	}
}
