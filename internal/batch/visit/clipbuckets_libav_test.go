//go:build brand_libav

package visit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	clipunit "github.com/brandgw/brand/internal/batch/units/clips"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/internal/testsupport/stagetest"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// clipBucketVideo is the i-th video of the clip bucket check: its key,
// width, height and frames at 10 fps — eight sizes (16:9, 9:16, 1:1,
// 4:3, as near a 16:9 bucket as the square one, 8:3, 3:8, a small one
// upscaled within the limit, and one too small) and 5 to 30 frames
// (those of 5 too short for every bucket).
func clipBucketVideo(i int) (key string, w, h, frames int) {
	sizes := [][2]int{{64, 36}, {36, 64}, {48, 48}, {40, 30}, {80, 30}, {30, 80}, {20, 12}, {12, 8}}
	lengths := []int{5, 8, 10, 12, 16, 18, 20, 24, 30, 17}
	s := sizes[i%len(sizes)]
	return fmt.Sprintf("c%d/v%03d.mp4", i%3, i), s[0], s[1], lengths[(i/len(sizes)+i)%len(lengths)]
}

// clipBucketStages writes n videos (clipBucketVideo) with ffmpeg into a
// store indexed in place (each video one chunk) and wires the stages
// over it; it returns them and each key's file.
func clipBucketStages(t *testing.T, n int) (*stagetest.Stages, map[string]string) {
	t.Helper()
	paths := videotest.Sized(t, t.TempDir(), n, clipBucketVideo)
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for key, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{
		Formats: []format.Format{video.Format{}}, Options: format.Options{ChunkBytes: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	return stagetest.New(t, stagetest.Config{Datasets: stagetest.Videos(st)}), paths
}

// clipBucketList are ten buckets of 576 pixels a frame at five aspect
// ratios, of 16 and 8 frames; the budget holds two clips of 16 frames or
// four of 8: a fill of 1 in every bucket.
const (
	clipBucketList  = "18x32x16,32x18x16,24x24x16,16x36x16,36x16x16,18x32x8,32x18x8,24x24x8,16x36x8,36x16x8"
	clipBucketQuery = "seed=11&buckets=" + clipBucketList + "&budget=18432&flip=0.5"
)

// servedClip is one clip as a batch serves it.
type servedClip struct {
	Step, Bucket int
	Key, Video   string
	Frames       []int
	Geo          [5]int
	Pixels       []byte // (T, H, W, 3)
}

// serveClipBuckets reads every step of epoch 0 at world w from resume
// point resume (every rank's batch of it), checking that each step is
// one bucket: each clip's frames of its shape, a geometry a clip.
func serveClipBuckets(t *testing.T, s *stagetest.Stages, w int, resume string, shapes []bucket.Shape) (steps []int, clips []servedClip) {
	t.Helper()
	ctx := context.Background()
	q := fmt.Sprintf("%s&world=%d", clipBucketQuery, w)
	if resume != "" {
		q += "&resume=" + resume
	}
	info, err := s.Epoch(ctx, q, 0)
	if err != nil || info.Buckets == nil {
		t.Fatalf("epoch 0 of %s: %+v, %v", q, info, err)
	}
	for m := range info.Batches {
		bk := -1
		for r := range w {
			b, body, err := s.Batch(ctx, fmt.Sprintf("%s&rank=%d", q, r), 0, uint64(m))
			if err != nil {
				t.Fatalf("step %d rank %d: %v", m, r, err)
			}
			geo := strings.Split(b.Content.(*clipunit.ClipBatch).Geometry(b), ";")
			samples := stagetest.Samples(t, body)
			if len(samples) != len(geo) || len(samples) == 0 {
				t.Fatalf("step %d rank %d: %d clips, geometry of %d", m, r, len(samples), len(geo))
			}
			for i, smp := range samples {
				var meta struct {
					Video  string `json:"video"`
					Frames []int  `json:"frames"`
				}
				if err := json.Unmarshal(smp.Files["json"], &meta); err != nil {
					t.Fatalf("step %d: %s.json: %v", m, smp.Key, err)
				}
				h, data, err := npy.Read(smp.Files["frames.npy"])
				if err != nil {
					t.Fatalf("step %d: %s.frames.npy: %v", m, smp.Key, err)
				}
				b := -1
				for j, sh := range shapes {
					if fmt.Sprint(h.Shape) == fmt.Sprint([]int64{int64(sh.T), int64(sh.H), int64(sh.W), 3}) {
						b = j
					}
				}
				if b < 0 || bk >= 0 && b != bk {
					t.Fatalf("step %d rank %d: clip %s of shape %v in a step of bucket %d", m, r, smp.Key, h.Shape, bk)
				}
				bk = b
				c := servedClip{Step: m, Bucket: b, Key: smp.Key, Video: meta.Video, Frames: meta.Frames, Pixels: data}
				if _, err := fmt.Sscanf(geo[i], "%d,%d,%d,%d,%d", &c.Geo[0], &c.Geo[1], &c.Geo[2], &c.Geo[3], &c.Geo[4]); err != nil {
					t.Fatalf("geometry %q: %v", geo[i], err)
				}
				clips = append(clips, c)
			}
		}
		steps = append(steps, bk)
	}
	return steps, clips
}

// TestClipBuckets is issue 78's check of clip buckets over 600 videos
// ffmpeg writes: every step one bucket at world 4, every video long
// enough and large enough for a bucket served once an epoch but for each
// bucket's last partial global batch, each bucket's share of the steps
// within one batch of proportional at every step, a mean fill of 1,
// every clip's bucket the rule an independent script (PyAV's sizes and
// frame counts, floating logs) computes, its pixels PyAV's frames
// resized to cover the bucket and cropped by Pillow, byte for byte
// (docs/transform.md §6.1, §12.3: both exact), its crop at the centre
// the script computes; resumed at step k at world 3, the rest of the
// epoch exactly once.
func TestClipBuckets(t *testing.T) {
	python := "/usr/bin/python3"
	if exec.Command(python, "-c", "import av, PIL").Run() != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Python 3 with PyAV and Pillow (scripts/ensure-ffmpeg.sh); CI=true: failing")
		}
		t.Skip("no Python 3 with PyAV and Pillow")
	}
	const n = 600
	s, paths := clipBucketStages(t, n)
	shapes, _ := bucket.Parse(clipBucketList)
	steps, served := serveClipBuckets(t, s, 4, "", shapes)

	byVideo := map[string]servedClip{}
	for _, c := range served {
		if _, ok := byVideo[c.Video]; ok {
			t.Fatalf("video %s served twice in an epoch", c.Video)
		}
		byVideo[c.Video] = c
	}
	info, err := s.Epoch(context.Background(), clipBucketQuery+"&world=4", 0)
	if err != nil {
		t.Fatal(err)
	}
	bi := info.Buckets
	// The independent rule, and the pixels.
	type refClip struct {
		Video  string `json:"video"`
		Frames []int  `json:"frames"`
		Bucket [2]int `json:"bucket"`
		Flip   int    `json:"flip"`
	}
	in := struct {
		Buckets    [][3]int          `json:"buckets"`
		Stride     int               `json:"stride"`
		MaxUpscale float64           `json:"max_upscale"`
		Videos     map[string]string `json:"videos"`
		Clips      []refClip         `json:"clips"`
	}{Stride: 1, MaxUpscale: 2, Videos: paths}
	for _, sh := range shapes {
		in.Buckets = append(in.Buckets, [3]int{sh.H, sh.W, sh.T})
	}
	for _, c := range served {
		in.Clips = append(in.Clips, refClip{Video: c.Video, Frames: c.Frames, Bucket: [2]int{shapes[c.Bucket].H, shapes[c.Bucket].W}, Flip: c.Geo[4]})
	}
	dir := t.TempDir()
	js, _ := json.Marshal(in)
	if err := os.WriteFile(filepath.Join(dir, "in.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("testdata/clip_buckets_ref.py")
	videotest.Run(t, python, script, filepath.Join(dir, "in.json"), filepath.Join(dir, "out.json"))
	var ref struct {
		Buckets map[string]int `json:"buckets"`
		Offsets [][2]int       `json:"offsets"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "out.json"))
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "out.json.raw"))
	want := make([]int, len(shapes)) // videos a bucket takes, by the reference
	short, small := 0, 0
	for key, r := range ref.Buckets {
		switch {
		case r == -1:
			short++
		case r == -2:
			small++
		default:
			want[r]++
		}
		if c, ok := byVideo[key]; ok && c.Bucket != r {
			t.Errorf("video %s served in bucket %v, the reference's rule says %d", key, shapes[c.Bucket], r)
		}
	}
	if short != bi.TooShort || small != bi.TooSmall || short == 0 || small == 0 {
		t.Errorf("too short %d, too small %d; /epoch says %d and %d", short, small, bi.TooShort, bi.TooSmall)
	}
	dropped := 0
	for i, bk := range bi.Buckets {
		if bk.Samples != want[i] {
			t.Errorf("bucket %s: /epoch says %d videos, the reference %d", bk.Shape, bk.Samples, want[i])
		}
		if bk.Dropped >= bk.BatchSize*4 || bk.Fill != 1 {
			t.Errorf("bucket %s: drops %d (a global batch is %d), fill %g", bk.Shape, bk.Dropped, bk.BatchSize*4, bk.Fill)
		}
		dropped += bk.Dropped
	}
	if len(byVideo)+bi.TooShort+bi.TooSmall+dropped != n || len(served) < 300 {
		t.Errorf("%d served, %d too short, %d too small, %d dropped, of %d videos", len(byVideo), bi.TooShort, bi.TooSmall, dropped, n)
	}
	off, maxDiff := 0, 0
	for i, c := range served {
		if ref.Offsets[i] != [2]int{c.Geo[2], c.Geo[3]} {
			t.Errorf("clip %s: crop at %v, the reference's centre %v", c.Key, c.Geo[2:4], ref.Offsets[i])
		}
		w := raw[off : off+len(c.Pixels)]
		off += len(c.Pixels)
		for j := range w {
			maxDiff = max(maxDiff, absDiff(w[j], c.Pixels[j]))
		}
	}
	if off != len(raw) || maxDiff != 0 {
		t.Errorf("pixels: %d bytes of %d compared, most apart %d; want equal", off, len(raw), maxDiff)
	}
	// Shares: after every step, each bucket within one batch of its share.
	count := make([]int, len(shapes))
	for _, st := range steps {
		count[st]++
	}
	got := make([]int, len(shapes))
	for i, st := range steps {
		got[st]++
		for k := range shapes {
			d := float64(got[k]) - float64(i+1)*float64(count[k])/float64(len(steps))
			if d <= -1 || d >= 1 {
				t.Fatalf("after %d steps bucket %v has %d of its %d", i+1, shapes[k], got[k], count[k])
			}
		}
	}
	if bi.Fill < 0.95 {
		t.Errorf("mean fill %g", bi.Fill)
	}
	t.Logf("%d videos: %d clips served in %d steps at world 4, %d too short, %d too small, %d dropped; pixels equal", n, len(served), len(steps), bi.TooShort, bi.TooSmall, dropped)

	// Resume at step k at world 3: the rest exactly once.
	k := len(steps) / 2
	seen := map[string]bool{}
	for _, c := range served {
		if c.Step < k {
			seen[c.Video] = true
		}
	}
	_, rest := serveClipBuckets(t, s, 3, fmt.Sprintf("4:%d", k), shapes)
	left := make([]int, len(shapes))
	for _, c := range rest {
		if seen[c.Video] {
			t.Fatalf("video %s served before and after the resume", c.Video)
		}
		seen[c.Video] = true
	}
	for key, r := range ref.Buckets {
		if r >= 0 && !seen[key] {
			left[r]++
		}
	}
	rinfo, err := s.Epoch(context.Background(), clipBucketQuery+fmt.Sprintf("&world=3&resume=4:%d", k), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, bk := range rinfo.Buckets.Buckets {
		if left[i] >= bk.BatchSize*3 || left[i] != bk.Dropped {
			t.Errorf("resumed: bucket %s leaves %d unserved (/epoch: %d dropped), a global batch at world 3 is %d", bk.Shape, left[i], bk.Dropped, bk.BatchSize*3)
		}
	}
}

func absDiff(a, b byte) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}
