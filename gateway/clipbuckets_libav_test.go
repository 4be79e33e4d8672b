//go:build brand_libav

package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// clipBucketVideos writes n short H.264 videos with ffmpeg, of eight
// sizes (16:9, 9:16, 1:1, 4:3 — as near a 16:9 bucket as a square one —,
// 8:3, 3:8, a small one upscaled within the limit, and one too small)
// and 5 to 30 frames at 10 fps (those of 5 too short for every bucket),
// into a store indexed in place, and returns the store and each key's
// file.
func clipBucketVideos(t *testing.T, n int) (s3backend.Store, map[string]string) {
	t.Helper()
	ffmpeg, _ := videotest.Tools(t)
	dir := t.TempDir()
	paths := make(map[string]string, n)
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for range 2 {
		wg.Go(func() {
			for i := range work {
				key, w, h, f := clipBucketVideo(i)
				p := filepath.Join(dir, fmt.Sprintf("v%03d.mp4", i))
				cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi",
					"-i", fmt.Sprintf("testsrc2=size=%dx%d:rate=10", w, h), "-frames:v", fmt.Sprint(f),
					"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "2", "-g", "6", "-map_metadata", "-1", "-fflags", "+bitexact", p)
				if out, err := cmd.CombinedOutput(); err != nil {
					errs[i] = fmt.Errorf("ffmpeg: %v: %s", err, out)
					continue
				}
				mu.Lock()
				paths[key] = p
				mu.Unlock()
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
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
	return st, paths
}

// clipBucketVideo is the i-th video clipBucketVideos writes: its key,
// width, height and frames.
func clipBucketVideo(i int) (key string, w, h, frames int) {
	sizes := [][2]int{{64, 36}, {36, 64}, {48, 48}, {40, 30}, {80, 30}, {30, 80}, {20, 12}, {12, 8}}
	lengths := []int{5, 8, 10, 12, 16, 18, 20, 24, 30, 17}
	s := sizes[i%len(sizes)]
	return fmt.Sprintf("c%d/v%03d.mp4", i%3, i), s[0], s[1], lengths[(i/len(sizes)+i)%len(lengths)]
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
// one bucket: each clip's frames of its shape, the geometry one a clip.
func serveClipBuckets(t *testing.T, base string, w int, resume string, shapes []bucket.Shape) (steps []int, clips []servedClip) {
	t.Helper()
	q := fmt.Sprintf("%s&world=%d", clipBucketQuery, w)
	if resume != "" {
		q += "&resume=" + resume
	}
	resp, body := get(t, base+"/epoch/0?"+q)
	var info api.EpochInfo
	if err := json.Unmarshal(body, &info); resp.StatusCode != http.StatusOK || err != nil || info.Buckets == nil {
		t.Fatalf("/epoch/0?%s: %s %s", q, resp.Status, body)
	}
	for m := range info.Batches {
		bk := -1
		for r := range w {
			resp, body := get(t, fmt.Sprintf("%s/epoch/0/batch/%d?%s&rank=%d", base, m, q, r))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("step %d rank %d: %s %s", m, r, resp.Status, body)
			}
			geo := strings.Split(resp.Header.Get(api.HeaderBucketGeometry), ";")
			samples := readTar(t, body)
			if len(samples) != len(geo) || len(samples) == 0 {
				t.Fatalf("step %d rank %d: %d clips, geometry of %d", m, r, len(samples), len(geo))
			}
			for i, s := range samples {
				var meta struct {
					Video  string `json:"video"`
					Frames []int  `json:"frames"`
				}
				if err := json.Unmarshal(s.files["json"], &meta); err != nil {
					t.Fatalf("step %d: %s.json: %v", m, s.key, err)
				}
				shape, data := npyShape(t, s.files["frames.npy"])
				b := -1
				for j, sh := range shapes {
					if fmt.Sprint(shape) == fmt.Sprint([]int{sh.T, sh.H, sh.W, 3}) {
						b = j
					}
				}
				if b < 0 || bk >= 0 && b != bk {
					t.Fatalf("step %d rank %d: clip %s of shape %v in a step of bucket %d", m, r, s.key, shape, bk)
				}
				bk = b
				c := servedClip{Step: m, Bucket: b, Key: s.key, Video: meta.Video, Frames: meta.Frames, Pixels: data}
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

// npyShape reads a .npy's shape and returns its data.
func npyShape(t *testing.T, b []byte) ([]int, []byte) {
	t.Helper()
	if len(b) < 10 || string(b[1:6]) != "NUMPY" {
		t.Fatalf("not a .npy")
	}
	hl := int(b[8]) | int(b[9])<<8
	hdr := string(b[10 : 10+hl])
	i, j := strings.Index(hdr, "'shape': ("), strings.Index(hdr, ")")
	var shape []int
	for _, f := range strings.Split(hdr[i+len("'shape': ("):j], ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err == nil {
			shape = append(shape, n)
		}
	}
	return shape, b[10+hl:]
}

// TestClipBuckets is issue 78's check of clip buckets over 600 videos
// ffmpeg writes: every step one bucket at world 4, every video long
// enough and large enough for a bucket served once an epoch but for each
// bucket's last partial global batch, each bucket's share of the steps
// within one batch of proportional at every step, a mean fill of 1,
// every clip's bucket the rule an independent script (PyAV's sizes and
// frame counts, floating logs) computes, its pixels PyAV's frames
// resized to cover the bucket and cropped by Pillow, byte for byte
// (docs/transform.md §6.1, §12.3: both exact); resumed at step k at
// world 3, the rest of the epoch exactly once; /plan's buckets equal
// /epoch's.
func TestClipBuckets(t *testing.T) {
	python := "/usr/bin/python3"
	if exec.Command(python, "-c", "import av, PIL").Run() != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Python 3 with PyAV and Pillow (scripts/ensure-ffmpeg.sh); CI=true: failing")
		}
		t.Skip("no Python 3 with PyAV and Pillow")
	}
	const n = 600
	st, paths := clipBucketVideos(t, n)
	_, srv := start(t, st, func(c *gateway.Config) {
		c.Datasets[0].Formats = []format.Format{video.Format{}}
	})
	shapes, _ := bucket.Parse(clipBucketList)
	steps, served := serveClipBuckets(t, srv.URL, 4, "", shapes)

	// Once an epoch, and what is left is what fits no bucket and each
	// bucket's last partial global batch.
	byVideo := map[string]servedClip{}
	count := make([]int, len(shapes))
	for _, c := range served {
		if _, ok := byVideo[c.Video]; ok {
			t.Fatalf("video %s served twice in an epoch", c.Video)
		}
		byVideo[c.Video] = c
	}
	resp, body := get(t, srv.URL+"/epoch/0?"+clipBucketQuery+"&world=4")
	var info api.EpochInfo
	if err := json.Unmarshal(body, &info); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatal(string(body))
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
	for _, s := range shapes {
		in.Buckets = append(in.Buckets, [3]int{s.H, s.W, s.T})
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
	ties := 0
	for i, bk := range bi.Buckets {
		if bk.Samples != want[i] {
			t.Errorf("bucket %s: /epoch says %d videos, the reference %d", bk.Shape, bk.Samples, want[i])
		}
		if bk.Dropped >= bk.BatchSize*4 || bk.Fill != 1 {
			t.Errorf("bucket %s: drops %d (a global batch is %d), fill %g", bk.Shape, bk.Dropped, bk.BatchSize*4, bk.Fill)
		}
		ties += bk.Samples
	}
	if len(byVideo)+bi.TooShort+bi.TooSmall+droppedOf(bi) != n || len(served) < 300 {
		t.Errorf("%d served, %d too short, %d too small, %d dropped, of %d videos", len(byVideo), bi.TooShort, bi.TooSmall, droppedOf(bi), n)
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
	for _, s := range steps {
		count[s]++
	}
	got := make([]int, len(shapes))
	for i, s := range steps {
		got[s]++
		for bk := range shapes {
			d := float64(got[bk]) - float64(i+1)*float64(count[bk])/float64(len(steps))
			if d <= -1 || d >= 1 {
				t.Fatalf("after %d steps bucket %v has %d of its %d", i+1, shapes[bk], got[bk], count[bk])
			}
		}
	}
	if bi.Fill < 0.95 {
		t.Errorf("mean fill %g", bi.Fill)
	}
	t.Logf("%d videos: %d clips served in %d steps at world 4, %d too short, %d too small, %d dropped; pixels equal", n, len(served), len(steps), bi.TooShort, bi.TooSmall, droppedOf(bi))

	// Resume at step k at world 3: the rest exactly once.
	k := len(steps) / 2
	seen := map[string]bool{}
	for _, c := range served {
		if c.Step < k {
			seen[c.Video] = true
		}
	}
	_, rest := serveClipBuckets(t, srv.URL, 3, fmt.Sprintf("4:%d", k), shapes)
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
	_, body = get(t, srv.URL+"/epoch/0?"+clipBucketQuery+fmt.Sprintf("&world=3&resume=4:%d", k))
	var rinfo api.EpochInfo
	json.Unmarshal(body, &rinfo)
	for i, bk := range rinfo.Buckets.Buckets {
		if left[i] >= bk.BatchSize*3 || left[i] != bk.Dropped {
			t.Errorf("resumed: bucket %s leaves %d unserved (/epoch: %d dropped), a global batch at world 3 is %d", bk.Shape, left[i], bk.Dropped, bk.BatchSize*3)
		}
	}

	// /plan's buckets are /epoch's.
	resp, body = get(t, srv.URL+"/plan?"+clipBucketQuery+"&world=4&epochs=2")
	var plan struct {
		Buckets []api.BucketPlanEpoch `json:"buckets"`
	}
	if err := json.Unmarshal(body, &plan); resp.StatusCode != http.StatusOK || err != nil || len(plan.Buckets) != 2 {
		t.Fatalf("/plan: %s %s", resp.Status, body)
	}
	for e := range 2 {
		_, body := get(t, fmt.Sprintf("%s/epoch/%d?%s&world=4", srv.URL, e, clipBucketQuery))
		var in api.EpochInfo
		json.Unmarshal(body, &in)
		g, _ := json.Marshal(plan.Buckets[e].BucketsInfo)
		w, _ := json.Marshal(in.Buckets)
		if string(g) != string(w) {
			t.Errorf("/plan's epoch %d: %s; /epoch/%d: %s", e, g, e, w)
		}
	}
}

func droppedOf(bi *api.BucketsInfo) int {
	n := 0
	for _, b := range bi.Buckets {
		n += b.Dropped
	}
	return n
}

func absDiff(a, b byte) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}
