//go:build brand_libav

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// The README's "Video clips and robot episodes", run as written: a
// Kinetics-style tree of videos (class folders, written by ffmpeg) and a
// LeRobot v3 dataset (videotest.LeRobot: AV1 and H.264 cameras, Parquet
// written by DuckDB) in read-only buckets of MinIO are indexed with the
// README's two `brand index` commands and served with its `brand serve`
// (given only the store's endpoint besides, and serve a port) built with
// the decoder; its curls then list a clip batch's first members, named as
// its comments say, and print /plan's first epoch of the clip job (its
// covering GOP bytes and decode CPU); the LeRobot dataset serves windows;
// and its PyTorch loop reads two epochs of every clip once, in steps of
// (8, 16, H, W, 3) uint8 frames and (8,) labels.
func TestReadmeVideo(t *testing.T) {
	const section = "Video clips and robot episodes"
	needTools(t, "bash", "curl", "tar", "jq")
	shBlocks := sectionBlocks(readmeBlocks(t, "../README.md"), section, "sh")
	pyBlocks := sectionBlocks(readmeBlocks(t, "../README.md"), section, "python")
	if len(shBlocks) != 1 || len(pyBlocks) != 1 {
		t.Fatalf("the README's %q has %d sh and %d Python blocks, want one each", section, len(shBlocks), len(pyBlocks))
	}
	py := pythontest.Need(t, "scripts/test-python.sh", "torch", "numpy")
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	for _, b := range []string{"videos", "mirror", "brand"} {
		if err := srv.MakeBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	proxy := newStoreProxy(t, srv.URL(), "videos", "mirror")
	bin := buildBrand(t)
	env := brandEnv(srv)
	open := func(u string) s3backend.Store {
		st, err := s3backend.Open(ctx, u, srv.Config())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	// train/{abseiling,juggling}/x1.mp4 ...: 3 s at 25 fps, 2 clips of
	// 16 frames 2 apart a video.
	made := videotest.Make(t, t.TempDir(), "h264.mp4", "h264-bframes.mp4", "h264-gop10s.mp4")
	kinetics := open("s3://videos/kinetics/train")
	videos := 0
	for i, f := range []string{"h264.mp4", "h264-bframes.mp4", "h264.mp4", "h264-bframes.mp4", "h264-gop10s.mp4"} {
		p, ok := made[f]
		if !ok {
			t.Fatalf("ffmpeg made no %s", f)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		putBytes(t, kinetics, fmt.Sprintf("%s/x%d.mp4", []string{"abseiling", "juggling"}[i%2], i+1), b)
		videos++
	}
	fx := videotest.LeRobot(t, "..", 0)
	aloha := open("s3://mirror/aloha")
	if err := filepath.WalkDir(fx.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(fx.Dir, p)
		putBytes(t, aloha, filepath.ToSlash(rel), b)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The block: brand's commands run by the test (index, then serve on a
	// free port), each curl line by bash against that gateway.
	b := shBlocks[0]
	var gw *clusterProc
	indexed := map[string]string{}
	outs := map[string]string{}
	lines := strings.Split(strings.TrimRight(b.text, "\n"), "\n")
	for i, line := range lines {
		switch {
		case strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#"):
		case strings.HasPrefix(line, "brand "):
			args := strings.Fields(line)[1:]
			switch args[0] {
			case "index":
				out := runBrand(t, bin, env, append(args, "--s3-endpoint", proxy.URL)...)
				t.Logf("%s\n→ %s", line, strings.TrimSpace(out))
				indexed[args[len(args)-1]] = out
			case "serve":
				gw = serveProc(t, bin, env, proxy.URL, args[1:]...)
				t.Logf("%s\n→ serving at %s", line, gw.url)
			default:
				t.Fatalf("README line %d runs brand %s, which this test does not know how to run", b.line+i, args[0])
			}
		default:
			if gw == nil {
				t.Fatalf("README line %d runs before any gateway is started: %s", b.line+i, line)
			}
			outs[line] = runShellBlock(t, readmeBlock{lang: "sh", section: section, text: line, line: b.line + i}, t.TempDir(), strings.TrimPrefix(gw.url, "http://"))
		}
	}
	if gw == nil {
		t.Fatalf("the README's commands start no gateway:\n%s", b.text)
	}
	if !strings.Contains(indexed["s3://brand/kinetics"], "of video") || !strings.Contains(indexed["s3://brand/aloha"], "of lerobot") {
		t.Errorf("brand index said %q and %q; want a video and a lerobot dataset", indexed["s3://brand/kinetics"], indexed["s3://brand/aloha"])
	}
	var listed, planned string
	for line, out := range outs {
		switch {
		case strings.Contains(line, "/epoch/0/batch/0") && strings.Contains(line, "tar -t"):
			listed = out
		case strings.Contains(line, "/plan?"):
			planned = out
		}
	}
	// The listing: a clip's frames, label and JSON, named as the comment
	// says (the class folder, the video, its segment).
	// (The listing's head closes the pipe on curl, which bash's
	// --show-error prints; the README's curl -s does not.)
	listed = regexp.MustCompile(`(?m)^curl: \(23\) .*\n`).ReplaceAllString(listed, "")
	member := regexp.MustCompile(`^(abseiling|juggling)/x\d/seg\d{6}\.(frames\.npy|cls|json)$`)
	names := strings.Fields(listed)
	if len(names) != 3 || !strings.HasSuffix(names[0], ".frames.npy") {
		t.Errorf("the README's listing printed %q; want a clip's frames.npy, cls and json", listed)
	}
	for _, n := range names {
		if !member.MatchString(n) {
			t.Errorf("the README's listing names %q, not CLASS/VIDEO/segNNNNNN.{frames.npy,cls,json}", n)
		}
	}
	var kin struct{ Samples, Batches int }
	if err := json.Unmarshal(fetch(t, gw.url+"/epoch/0?dataset=kinetics&clip=16&stride=2&batch_size=8"), &kin); err != nil || kin.Samples < videos {
		t.Fatalf("the clip job's epoch: %+v %v; want a clip a video at least", kin, err)
	}
	var epoch struct {
		Epoch         *int    `json:"epoch"`
		Clips         int     `json:"clips"`
		CoveringBytes int64   `json:"covering_gop_bytes"`
		StoreBytes    int64   `json:"store_bytes"`
		DecodeCPU     float64 `json:"decode_cpu_seconds"`
	}
	if err := json.Unmarshal([]byte(planned), &epoch); err != nil || epoch.Epoch == nil || *epoch.Epoch != 0 || epoch.Clips != kin.Samples ||
		epoch.CoveringBytes <= 0 || epoch.StoreBytes < epoch.CoveringBytes || epoch.DecodeCPU <= 0 {
		t.Errorf("the README's /plan printed %q (%v); want epoch 0 of %d clips, its covering GOP bytes, store bytes and decode CPU", planned, err, kin.Samples)
	}
	// The LeRobot dataset the block serves: windows of a camera's frames.
	var info struct {
		Samples int
		Clips   struct{ Kind string }
	}
	q := "dataset=aloha&delta_timestamps=" + url.QueryEscape(videotest.CamWrist+":-0.1,0") + "&batch_size=8"
	if err := json.Unmarshal(fetch(t, gw.url+"/epoch/0?"+q), &info); err != nil || info.Clips.Kind != "lerobot" || info.Samples != 35 {
		t.Errorf("the LeRobot dataset served: %+v %v; want 35 anchor frames of a lerobot dataset", info, err)
	}
	fetch(t, gw.url+"/epoch/0/batch/0?"+q)

	// The PyTorch loop: two epochs, each every clip once.
	r := runPythonBlock(t, py, pyBlocks[0], t.TempDir(), gw.url, 2, "x", "y")
	for e := range 2 {
		if c, ok := r.Epochs[fmt.Sprint(e)]; !ok || c.Samples != kin.Samples || c.Steps != kin.Batches {
			t.Errorf("the README's loop, epoch %d: %+v; want %d clips in %d steps", e, c, kin.Samples, kin.Batches)
		}
	}
	type tensor struct {
		Shape []int
		Dtype string
	}
	var x, y tensor
	if json.Unmarshal(r.Globals["x"], &x) != nil || json.Unmarshal(r.Globals["y"], &y) != nil || len(x.Shape) != 5 ||
		x.Shape[0] < 1 || x.Shape[0] > 8 || fmt.Sprint(x.Shape[1:]) != "[16 48 64 3]" || x.Dtype != "torch.uint8" ||
		fmt.Sprint(y.Shape) != fmt.Sprint(x.Shape[:1]) || y.Dtype != "torch.int64" {
		t.Errorf("the README's loop's last step: x %s, y %s; want uint8 (B, 16, 48, 64, 3) frames and int64 (B,) labels", r.Globals["x"], r.Globals["y"])
	}
	if w := proxy.writesRefused(); len(w) > 0 {
		t.Errorf("Brand tried to write to the videos or the mirror: %v", w)
	}
}
