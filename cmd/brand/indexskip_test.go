package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// videoTree writes each named video (key → ffmpeg output options) as
// Debian's ffmpeg encodes it, 20 frames of 64×48 at 10 fps, under a new
// directory, and returns it.
func videoTree(t *testing.T, files map[string][]string) string {
	t.Helper()
	dir := t.TempDir()
	for i, key := range slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	}) {
		p := filepath.Join(dir, key)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		videotest.Encode(t, p, "64x48", 10, 20, 3*i, files[key]...)
	}
	return dir
}

var (
	h264 = []string{"-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "10", "-sc_threshold", "0"}
	vp9  = []string{"-c:v", "libvpx-vp9", "-g", "10", "-deadline", "realtime", "-cpu-used", "8"}
)

// skippedOf returns the manifest's skipped files of the dataset at dir.
func skippedOf(t *testing.T, dir string) []chunkindex.ManifestSkipped {
	t.Helper()
	st, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stored.ReadManifest(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if m.InPlace == nil {
		t.Fatalf("the manifest of %s is not of a dataset served in place", dir)
	}
	return m.InPlace.Skipped
}

// A tree of video files in containers the index does not read (WebM with
// VP9, Matroska with H.264, as Debian's ffmpeg writes them) is taken for
// a tree of videos and refused naming the containers and the remedy,
// never for tar shards ("no .tar objects"); the remedy it names (a
// remux, streams copied) makes the WebM file one it indexes. A WebM or
// Matroska file beside MP4s is left out, counted and named in the
// command's output and the manifest.
func TestIndexVideoContainers(t *testing.T) {
	videotest.Tools(t)
	for _, tc := range []struct {
		name    string
		files   map[string][]string
		code    int
		says    []string // in the output (stdout and stderr)
		never   string
		skipped []string // the manifest's
	}{
		{"webm and mkv alone", map[string][]string{"a/x.webm": vp9, "b/y.mkv": h264}, 1,
			[]string{"1 Matroska and 1 WebM files", "a/x.webm first", "-c copy"}, "no .tar objects", nil},
		{"webm alone", map[string][]string{"x.webm": vp9}, 1,
			[]string{"x.webm is WebM", "remux it", "-c copy"}, "no .tar objects", nil},
		// 3GPP's files are ISO BMFF, which the index reads.
		{"3gp", map[string][]string{"a/x.3gp": h264, "b/y.3g2": h264}, 0, []string{"indexed 4 samples"}, "", nil},
		{"webm beside mp4", map[string][]string{"a/x.mp4": h264, "a/y.webm": vp9, "b/z.mp4": h264}, 0,
			[]string{"indexed 4 samples", "skipped 1 files", "a/y.webm: WebM: a container the video index does not read"}, "", []string{"a/y.webm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := videoTree(t, tc.files)
			code, out, errOut := brand(t, "index", "--src", dir, "--parallel", "2")
			all := out + errOut
			if code != tc.code {
				t.Fatalf("index exited %d, want %d:\n%s", code, tc.code, all)
			}
			for _, s := range tc.says {
				if !strings.Contains(all, s) {
					t.Errorf("index's output lacks %q:\n%s", s, all)
				}
			}
			if tc.never != "" && strings.Contains(all, tc.never) {
				t.Errorf("index's output says %q:\n%s", tc.never, all)
			}
			if code != 0 {
				return
			}
			var keys []string
			for _, s := range skippedOf(t, dir) {
				if !strings.Contains(s.Reason, "WebM") {
					t.Errorf("the manifest skips %s for %q; want its container named", s.Key, s.Reason)
				}
				keys = append(keys, s.Key)
			}
			if !slices.Equal(keys, tc.skipped) {
				t.Errorf("the manifest skips %q, want %q", keys, tc.skipped)
			}
		})
	}

	// The remedy as the refusal words it.
	dir := videoTree(t, map[string][]string{"x.webm": vp9})
	ffmpeg, _ := videotest.Tools(t)
	videotest.Run(t, ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-i", filepath.Join(dir, "x.webm"), "-c", "copy", filepath.Join(dir, "x.mp4"))
	if err := os.Remove(filepath.Join(dir, "x.webm")); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := brand(t, "index", "--src", dir); code != 0 || !regexp.MustCompile(`^indexed [0-9]+ samples`).MatchString(out) {
		t.Fatalf("index of the remuxed file exited %d:\n%s%s", code, out, errOut)
	}
}

// Files that cannot be indexed among good ones — a truncated MP4, a text
// file named .mp4 — refuse the whole tree by default, naming the first;
// with --skip-bad-files the tree is indexed without them, and the output
// and the manifest name each and why. The flag is refused where nothing would be skipped (tar
// shards) and with --append, which keeps the dataset's settings.
func TestIndexSkipBadFiles(t *testing.T) {
	videotest.Tools(t)
	dir := videoTree(t, map[string][]string{"a/x.mp4": h264, "a/y.mp4": h264, "b/z.mp4": h264})
	good, err := os.ReadFile(filepath.Join(dir, "a", "y.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "y.mp4"), good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b", "notes.mp4"), []byte("not a video at all\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := brand(t, "index", "--src", dir, "--parallel", "2")
	if code != 1 || !strings.Contains(errOut, "a/y.mp4") && !strings.Contains(errOut, "b/notes.mp4") {
		t.Fatalf("index of a tree with a truncated file exited %d, want 1 naming it:\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "_brand")); err == nil {
		t.Fatal("a refused index stored something")
	}

	code, out, errOut = brand(t, "index", "--src", dir, "--parallel", "2", "--skip-bad-files")
	if code != 0 {
		t.Fatalf("index --skip-bad-files exited %d:\n%s%s", code, out, errOut)
	}
	// Two files of 20 frames, a GOP every 10: 4 samples.
	if !regexp.MustCompile(`(?m)^indexed 4 samples .*\nskipped 2 files, named with why in the manifest:\n  a/y\.mp4: .+\n  b/notes\.mp4: .+\n`).MatchString(out) {
		t.Errorf("index --skip-bad-files printed:\n%s", out)
	}
	sk := skippedOf(t, dir)
	if len(sk) != 2 || sk[0].Key != "a/y.mp4" || sk[1].Key != "b/notes.mp4" {
		t.Fatalf("the manifest skips %+v; want a/y.mp4 and b/notes.mp4", sk)
	}
	for _, s := range sk {
		if !strings.Contains(s.Reason, "mp4:") {
			t.Errorf("the manifest skips %s for %q; want the index's reason", s.Key, s.Reason)
		}
	}
	if code, out, errOut := brand(t, "inspect", "--src", dir); code != 0 || !strings.Contains(out, "skipped       2 files left out at index time, a/y.mp4 first") {
		t.Errorf("inspect exited %d:\n%s%s; want the files skipped said", code, out, errOut)
	}

	// Nothing left to index is refused, naming the first file that could
	// not be (not a file of a container not read).
	none := videoTree(t, map[string][]string{"a.webm": vp9})
	if err := os.WriteFile(filepath.Join(none, "b.mp4"), []byte("not a video at all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"nothing left", []string{"index", "--src", none, "--skip-bad-files"}, "none of the 1 video files could be indexed (b.mp4 first: mp4:"},
		{"tar shards", []string{"index", "--src", synthTree(t, 4), "--format", "tar", "--skip-bad-files"}, "--skip-bad-files is for a tree of videos"},
		{"append", []string{"index", "--src", dir, "--append", "--skip-bad-files"}, "--append keeps"},
	} {
		if code, out, errOut := brand(t, tc.args...); code == 0 || !strings.Contains(errOut, tc.says) {
			t.Errorf("%s: exited %d:\n%s%s; want a refusal saying %q", tc.name, code, out, errOut, tc.says)
		}
	}
}
