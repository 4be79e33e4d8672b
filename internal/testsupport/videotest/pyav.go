package videotest

import (
	_ "embed"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// PyAV returns a Python 3 that imports av and numpy (Debian's
// python3-av: scripts/ensure-pyav.sh), or skips; with CI=true it fails.
func PyAV(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("PYTHON"), "python3", "/usr/bin/python3"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import av, numpy").Run() == nil {
			return path
		}
	}
	msg := "no Python 3 with PyAV (run scripts/ensure-pyav.sh)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true: failing")
	}
	t.Skip(msg)
	return ""
}

// Reference is every frame of a video as PyAV decodes the whole file
// with frame.to_ndarray(format="rgb24"): the pixels a served frame is
// held to, by PTS.
type Reference struct {
	Width, Height int
	Frames        map[int64][]byte
}

// pyavFrames is pyav_frames.py, embedded rather than found beside this
// file's source path, which a -trimpath build (scripts/test.sh's) does
// not keep.
//
//go:embed pyav_frames.py
var pyavFrames []byte

// Decode decodes the video at path with PyAV (pyav_frames.py beside
// this file).
func Decode(t testing.TB, path string) Reference {
	t.Helper()
	py := PyAV(t)
	out := t.TempDir()
	script := filepath.Join(t.TempDir(), "pyav_frames.py")
	if err := os.WriteFile(script, pyavFrames, 0o644); err != nil {
		t.Fatal(err)
	}
	Run(t, py, script, path, out)
	var meta struct {
		Width, Height int
		PTS           []int64
	}
	b, err := os.ReadFile(filepath.Join(out, "frames.json"))
	if err == nil {
		err = json.Unmarshal(b, &meta)
	}
	if err != nil {
		t.Fatalf("PyAV's frames of %s: %v", path, err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "frames.raw"))
	if err != nil {
		t.Fatal(err)
	}
	n := meta.Width * meta.Height * 3
	if len(raw) != n*len(meta.PTS) {
		t.Fatalf("PyAV's frames of %s: %d bytes for %d frames of %dx%d", path, len(raw), len(meta.PTS), meta.Width, meta.Height)
	}
	ref := Reference{Width: meta.Width, Height: meta.Height, Frames: map[int64][]byte{}}
	for i, pts := range meta.PTS {
		ref.Frames[pts] = raw[i*n : (i+1)*n]
	}
	return ref
}

// Digests is every frame of a video as PyAV decodes the whole file, as
// the SHA-256 of its frame.to_ndarray(format="rgb24") bytes: the
// reference of videos too large to hold decoded.
type Digests struct {
	Width, Height int
	Frames        map[int64][32]byte
}

// DecodeDigests is Decode, keeping each frame's SHA-256.
func DecodeDigests(t testing.TB, path string) Digests {
	t.Helper()
	py := PyAV(t)
	out := t.TempDir()
	script := filepath.Join(t.TempDir(), "pyav_frames.py")
	if err := os.WriteFile(script, pyavFrames, 0o644); err != nil {
		t.Fatal(err)
	}
	Run(t, py, script, path, out, "--sha256")
	var meta struct {
		Width, Height int
		PTS           []int64
	}
	b, err := os.ReadFile(filepath.Join(out, "frames.json"))
	if err == nil {
		err = json.Unmarshal(b, &meta)
	}
	if err != nil {
		t.Fatalf("PyAV's frames of %s: %v", path, err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "frames.sha256"))
	if err != nil || len(raw) != 32*len(meta.PTS) {
		t.Fatalf("PyAV's digests of %s: %d bytes for %d frames (%v)", path, len(raw), len(meta.PTS), err)
	}
	d := Digests{Width: meta.Width, Height: meta.Height, Frames: map[int64][32]byte{}}
	for i, pts := range meta.PTS {
		d.Frames[pts] = [32]byte(raw[32*i : 32*i+32])
	}
	return d
}
