package imagesize

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fixture reads one of transform's test images (written by Pillow:
// transform/testdata/make_fixtures.py).
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "transform", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// member is a sample's member, name and bytes.
type member struct {
	name string
	data []byte
}

func seq(ms []member) func(func(string, []byte) bool) {
	return func(yield func(string, []byte) bool) {
		for _, m := range ms {
			if !yield(m.name, m.data) {
				return
			}
		}
	}
}

func tarOf(t testing.TB, ms []member) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range ms {
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(m.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Flush(); err != nil { // a sample's members, without the archive's end
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestIsImage(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"k.jpg", true}, {"k.jpeg", true}, {"k.png", true}, {"n01440764/x.JPEG", true}, {"k.0.PNG", true},
		{"k.first.jpg", true}, {"k.webp", false}, {"k.gif", false}, {"k.txt", false}, {"jpg", false},
		{"k.jpg.json", false}, {"k.", false}, {"", false},
	} {
		if got := IsImage(tc.name); got != tc.want {
			t.Errorf("IsImage(%q) = %v; want %v", tc.name, got, tc.want)
		}
	}
}

// TestRead: a sample's size is its first image member's, EXIF applied;
// a sample without one, or whose first image's header does not read
// (cut short, not an image, a pixel bomb past the bound), has none and
// a reason, and neither crashes nor allocates the bomb's pixels. The
// members as a tar answer alike.
func TestRead(t *testing.T) {
	photo, png, rotated := fixture(t, "photo.jpg"), fixture(t, "photo.png"), fixture(t, "exif-6.jpg")
	for _, tc := range []struct {
		name    string
		members []member
		max     int64
		want    Size
		bad     string // a part of the reason; "" for none
	}{
		{"no members", nil, 0, Size{}, NoImage},
		{"no image", []member{{"k.txt", []byte("a cat")}, {"k.cls", []byte("3")}}, 0, Size{}, NoImage},
		{"a webp is none", []member{{"k.webp", []byte("RIFF\x00\x00\x00\x00WEBPVP8 ")}}, 0, Size{}, NoImage},
		{"PNG", []member{{"k.cls", []byte("3")}, {"k.png", png}}, 0, Size{48, 32}, ""},
		{"JPEG", []member{{"k.jpg", photo}, {"k.txt", []byte("x")}}, 0, Size{48, 32}, ""},
		{"upper-case JPEG", []member{{"n01/k.JPEG", photo}}, 0, Size{48, 32}, ""},
		{"EXIF orientation 6", []member{{"k.jpg", rotated}}, 0, Size{32, 48}, ""},
		{"the first image", []member{{"k.0.jpg", rotated}, {"k.1.png", png}}, 0, Size{32, 48}, ""},
		{"the first image, bad", []member{{"k.0.jpg", photo[:20]}, {"k.1.png", png}}, 0, Size{}, "jpg: "},
		{"truncated header", []member{{"k.png", png[:20]}}, 0, Size{}, "png: "},
		{"not an image", []member{{"k.jpg", []byte("GIF89a not a jpeg")}}, 0, Size{}, "neither JPEG nor PNG"},
		{"pixel bomb", []member{{"k.png", fixture(t, "bomb.png")}}, 0, Size{}, "100000×100000"},
		{"JPEG pixel bomb", []member{{"k.jpg", fixture(t, "bomb.jpg")}}, 0, Size{}, "60000×60000"},
		{"past the bound", []member{{"k.jpg", rotated}}, 48*32 - 1, Size{}, "48×32"},
		{"within the bound", []member{{"k.jpg", rotated}}, 48 * 32, Size{32, 48}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(how string, s Size, bad string) {
				t.Helper()
				if s != tc.want || (bad == "") != (tc.bad == "") || !strings.Contains(bad, tc.bad) {
					t.Errorf("%s: %v, %q; want %v, %q", how, s, bad, tc.want, tc.bad)
				}
			}
			s, bad := Read(seq(tc.members), tc.max)
			check("Read", s, bad)
			if tc.max == 0 {
				s, bad = Of(seq(tc.members))
				check("Of", s, bad)
			}
			s, bad, _ = ReadTar(tarOf(t, tc.members), tc.max)
			check("ReadTar", s, bad)
		})
	}
	// Members after the first image are not asked for.
	asked := 0
	Of(func(yield func(string, []byte) bool) {
		for _, m := range []member{{"k.png", png}, {"k.jpg", photo}, {"k.txt", nil}} {
			asked++
			if !yield(m.name, m.data) {
				return
			}
		}
	})
	if asked != 1 {
		t.Errorf("%d members asked for; want 1", asked)
	}
	bomb := seq([]member{{"k.png", fixture(t, "bomb.png")}})
	if a := testing.AllocsPerRun(10, func() { Of(bomb) }); a > 40 {
		t.Errorf("refusing a pixel bomb made %.0f allocations", a)
	}
}

// TestReadTarPrefix: a prefix of a sample's tar either answers as the
// whole does, or says it is short; never a wrong size, never a reason
// that more bytes would change without saying so.
func TestReadTarPrefix(t *testing.T) {
	for _, ms := range [][]member{
		{{"k.json", bytes.Repeat([]byte("x"), 1500)}, {"k.jpg", fixture(t, "exif-6.jpg")}, {"k.txt", []byte("a dog")}},
		{{"k.png", fixture(t, "photo.png")}},
		{{"k.txt", []byte("no image")}, {"k.cls", []byte("1")}},
		{{"k.jpg", fixture(t, "photo.jpg")[:30]}},
	} {
		whole := tarOf(t, ms)
		want, wantBad, _ := ReadTar(whole, 0)
		answered := len(whole) + 1
		for n := range len(whole) + 1 {
			s, bad, short := ReadTar(whole[:n], 0)
			switch {
			case bad == "" && (s != want || wantBad != ""):
				t.Fatalf("%s, first %d bytes: %v; the whole gives %v, %q", ms[0].name, n, s, want, wantBad)
			case bad != "" && !short && n < len(whole) && bad != wantBad:
				t.Fatalf("%s, first %d bytes: %q and not short; the whole gives %v, %q", ms[0].name, n, bad, want, wantBad)
			case bad == "":
				answered = min(answered, n)
			}
		}
		if i := slices.IndexFunc(ms, func(m member) bool { return IsImage(m.name) }); wantBad == "" && answered > len(whole)-len(ms[i].data)/2 {
			t.Errorf("%s: answered from %d bytes of %d: the header is not all it reads", ms[i].name, answered, len(whole))
		}
	}
}

// TestDecoded: Decoded is Read, and an image whose header reads but
// whose data does not decode has why, where Read gives its size (issue
// 98, item 14).
func TestDecoded(t *testing.T) {
	photo, png := fixture(t, "photo.jpg"), fixture(t, "photo.png")
	for _, tc := range []struct {
		name    string
		members []member
		want    Size
		bad     string // a part of Decoded's reason; "" for none
	}{
		{"JPEG", []member{{"k.jpg", photo}}, Size{48, 32}, ""},
		{"PNG", []member{{"k.png", png}}, Size{48, 32}, ""},
		{"no image", []member{{"k.txt", []byte("a cat")}}, Size{}, NoImage},
		{"a JPEG cut after its header", []member{{"k.jpg", photo[:len(photo)/2]}}, Size{}, "jpg: the data does not decode"},
		{"a PNG cut after its header", []member{{"k.png", png[:len(png)-24]}}, Size{}, "png: the data does not decode"},
		{"a PNG's data damaged", []member{{"k.png", damaged(png)}}, Size{}, "png: the data does not decode"},
		{"a header that does not read", []member{{"k.png", png[:20]}}, Size{}, "png: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, bad := Decoded(seq(tc.members), 0)
			if got != tc.want || (tc.bad == "") != (bad == "") || !strings.Contains(bad, tc.bad) {
				t.Errorf("Decoded = %v, %q; want %v, %q", got, bad, tc.want, tc.bad)
			}
			if tc.bad != "" && strings.Contains(tc.bad, "does not decode") {
				if s, why := Read(seq(tc.members), 0); why != "" || s == (Size{}) {
					t.Errorf("Read = %v, %q: its header should read, or the case tests nothing", s, why)
				}
			}
		})
	}
}

// damaged is png with a byte of its last chunk's data flipped: its
// header reads, its data fails its checksum.
func damaged(png []byte) []byte {
	b := bytes.Clone(png)
	b[len(b)-20] ^= 0xff
	return b
}
