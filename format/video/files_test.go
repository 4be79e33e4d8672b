package video

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/internal/testsupport/videotest"
)

// tree puts the fixtures named into a store at the keys given.
func tree(t testing.TB, fixtures map[string]string, at map[string]string) *decodetest.Store {
	t.Helper()
	st := decodetest.NewStore()
	for key, name := range at {
		path, ok := fixtures[name]
		if !isVideo(key) {
			st.Objs[key] = []byte(name)
			continue
		}
		if !ok {
			t.Fatalf("no fixture %s", name)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		st.Objs[key] = b
	}
	return st
}

// members returns a decoded tar stream's members by name.
func members(t testing.TB, stream []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(stream))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}

// TestFiles indexes a tree of class folders of videos of every codec,
// decodes every chunk as a gateway would (each read only its GOPs'
// ranges), and checks each GOP's member is its samples' bytes in the
// file, each sample found in it where the index says.
func TestFiles(t *testing.T) {
	fx := videotest.Make(t, t.TempDir(), "h264.mp4", "h264-bframes.mp4", "h264-audio.mp4", "hevc.mp4", "vp9.mp4", "av1.mp4", "h264-frag.mp4", "h264.mov")
	at := map[string]string{
		"train/cats/a.mp4":   "h264.mp4",
		"train/cats/b.mp4":   "h264-bframes.mp4",
		"train/cats/c.mov":   "h264.mov",
		"train/dogs/d.mp4":   "h264-audio.mp4",
		"train/dogs/e.mp4":   "hevc.mp4",
		"train/dogs/f.mp4":   "h264-frag.mp4",
		"train/dogs/f.json":  `{"caption": "a dog"}`,
		"train/eels/g.mp4":   "vp9.mp4",
		"train/eels/h.mp4":   "av1.mp4",
		"train/README.txt":   "not a video",
		"train/eels/h.notes": "",
	}
	for k, v := range at {
		if _, ok := fx[v]; !ok && strings.HasSuffix(k, ".mp4") {
			delete(at, k) // an encoder this ffmpeg lacks
		}
	}
	st := tree(t, fx, at)
	ctx := context.Background()
	for _, chunkBytes := range []int64{0, 3000} {
		d, stats, err := IndexFiles(ctx, st, st.List(), format.Options{ChunkBytes: chunkBytes})
		if err != nil {
			t.Fatal(err)
		}
		if !(Format{}).Detect(st.List()) {
			t.Error("not detected")
		}
		if want := []string{"cats", "dogs", "eels"}; strings.Join(d.Classes, ",") != strings.Join(want, ",") {
			t.Errorf("classes %v, want %v", d.Classes, want)
		}
		for _, v := range d.Videos {
			want := map[string]int{"cats": 0, "dogs": 1, "eels": 2}[filepath.Base(filepath.Dir(v.Key))]
			if v.Label != want {
				t.Errorf("%s: label %d, want %d", v.Key, v.Label, want)
			}
			if (v.JSON != nil) != strings.HasSuffix(v.Key, "f.mp4") {
				t.Errorf("%s: JSON %q", v.Key, v.JSON)
			}
		}
		lay, err := d.layout(nil)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := Format{}.Open(lay.Meta)
		if err != nil {
			t.Fatal(err)
		}
		if chunkBytes > 0 && len(lay.Chunks) <= len(d.Videos) {
			t.Errorf("%d chunks of %d bytes for %d videos: not cut", len(lay.Chunks), chunkBytes, len(d.Videos))
		}
		// Each chunk's key (object#name, as brand index names it) is its own.
		seen := map[string]bool{}
		for _, ch := range lay.Chunks {
			k := ch.Object + "#" + ch.Name
			if ch.Name == "" || seen[k] {
				t.Fatalf("chunk key %q repeats or has no name", k)
			}
			seen[k] = true
		}
		out := members(t, decodetest.DecodeAll(t, st, lay, dec, nil))
		vd := dec.(*Decoder)
		n := 0
		for v, vid := range vd.Dataset().Videos {
			file := st.Objs[vid.Key]
			for g, gop := range vid.Track.GOPs {
				m, ok := out[vd.GOPKey(v, g)+".gop"]
				if !ok {
					t.Fatalf("no member %s.gop", vd.GOPKey(v, g))
				}
				var want []byte
				for _, r := range gop.Ranges {
					want = append(want, file[r.Off:r.End()]...)
				}
				if !bytes.Equal(m, want) {
					t.Fatalf("%s GOP %d: the member is not its ranges' bytes", vid.Key, g)
				}
				for s := gop.First; s < gop.End; s++ {
					b, err := vid.GOPSample(g, int(s), m)
					smp := vid.Track.Samples[s]
					if err != nil || !bytes.Equal(b, file[smp.Off:smp.Off+int64(smp.Size)]) {
						t.Fatalf("%s sample %d: %v", vid.Key, s, err)
					}
				}
				n++
			}
		}
		if n != len(lay.Keys) {
			t.Errorf("%d GOPs, %d keys", n, len(lay.Keys))
		}
		// Every read was of metadata: each file's bytes read are a small
		// part of it.
		for _, f := range stats.PerFile {
			t.Logf("%s: %d bytes, %d reads of %d bytes (%.1f%%) in %v", f.Key, f.Size, f.Reads, f.Bytes, 100*float64(f.Bytes)/float64(f.Size), f.Elapsed)
		}
		// The description reads back to the same bytes.
		again, err := vd.Dataset().encode()
		if err != nil || !bytes.Equal(again, lay.Meta) {
			t.Errorf("the description does not read back to itself: %v", err)
		}
	}
}

// TestLabels: .cls files beside the videos win over folders; videos not
// in folders have none; a .cls that is not a number is refused.
func TestLabels(t *testing.T) {
	fx := videotest.Make(t, t.TempDir(), "h264.mp4")
	ctx := context.Background()
	cases := []struct {
		name   string
		at     map[string]string
		labels map[string]int
		err    string
	}{
		{"cls files", map[string]string{"x/a.mp4": "h264.mp4", "x/a.cls": "7\n", "y/b.mp4": "h264.mp4", "y/b.cls": "3"}, map[string]int{"x/a.mp4": 7, "y/b.mp4": 3}, ""},
		{"a video without its cls", map[string]string{"a.mp4": "h264.mp4", "a.cls": "1", "b.mp4": "h264.mp4"}, map[string]int{"a.mp4": 1, "b.mp4": -1}, ""},
		{"no folders", map[string]string{"a.mp4": "h264.mp4", "b.mp4": "h264.mp4"}, map[string]int{"a.mp4": -1, "b.mp4": -1}, ""},
		{"one folder", map[string]string{"v/a.mp4": "h264.mp4", "v/b.mp4": "h264.mp4"}, map[string]int{"v/a.mp4": -1, "v/b.mp4": -1}, ""},
		{"a cls that is not a number", map[string]string{"a.mp4": "h264.mp4", "a.cls": "cat"}, nil, `a.cls holds "cat", not a class number`},
		{"a json that is not JSON", map[string]string{"a.mp4": "h264.mp4", "a.json": "{"}, nil, "a.json is not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := tree(t, fx, tc.at)
			d, _, err := IndexFiles(ctx, st, st.List(), format.Options{})
			if tc.err != "" {
				if err == nil || !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%v; want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range d.Videos {
				if v.Label != tc.labels[v.Key] {
					t.Errorf("%s: label %d, want %d", v.Key, v.Label, tc.labels[v.Key])
				}
			}
		})
	}
}

// TestFilesRefused: a video Brand cannot index fails the index, naming
// it and why, and nothing is described.
func TestFilesRefused(t *testing.T) {
	fx := videotest.Make(t, t.TempDir(), "h264.mp4", "h264-bframes.mp4")
	good, err := os.ReadFile(fx["h264.mp4"])
	if err != nil {
		t.Fatal(err)
	}
	// 16384 × 16384 in the sample entry.
	huge := bytes.Clone(good)
	i := bytes.Index(huge, []byte("stsd")) + 12 + 4 // the first sample entry's type
	if string(huge[i:i+4]) != "avc1" {
		t.Fatalf("no avc1 entry at %d", i)
	}
	copy(huge[i+4+24:], []byte{0x40, 0, 0x40, 0})
	// An audio-only file, from the fixture with its video handler renamed.
	noVideo := bytes.Clone(good)
	j := bytes.Index(noVideo, []byte("hdlr")) + 12 // its handler_type
	if string(noVideo[j:j+4]) != "vide" {
		t.Fatalf("no vide handler at %d", j)
	}
	copy(noVideo[j:], "soun")
	ctx := context.Background()
	cases := []struct {
		name string
		objs map[string][]byte
		kind error
		says string
	}{
		{"no videos", map[string][]byte{"a.txt": []byte("x")}, format.ErrInvalid, "no video files"},
		{"truncated", map[string][]byte{"ok.mp4": good, "bad.mp4": good[:len(good)-100]}, format.ErrInvalid, "bad.mp4: mp4"},
		{"16k × 16k", map[string][]byte{"ok.mp4": good, "big.mp4": huge}, mp4.ErrLimit, "big.mp4: mp4: over a limit: invalid dataset: the video is 16384 × 16384"},
		{"no video track", map[string][]byte{"sound.mp4": noVideo}, mp4.ErrNoVideo, "sound.mp4: mp4: no video track"},
		{"not an MP4", map[string][]byte{"fake.mp4": []byte("<html>not found</html>")}, format.ErrInvalid, "fake.mp4: mp4: invalid dataset: not an MP4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := decodetest.NewStore()
			for k, b := range tc.objs {
				st.Objs[k] = b
			}
			_, err := Format{}.Index(ctx, st, st.List(), format.Options{})
			if err == nil || !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v; want %v saying %q", err, tc.kind, tc.says)
			}
		})
	}
}

// FuzzOpen: no description makes Open panic, and one it accepts has
// chunks whose extents are inside their videos.
func FuzzOpen(f *testing.F) {
	b, err := os.ReadFile("mp4/testdata/bframes.mp4")
	if err != nil {
		f.Fatal(err)
	}
	st := decodetest.NewStore()
	st.Objs["a/x.mp4"] = b
	st.Objs["b/y.mp4"] = b
	lay, err := Format{}.Index(context.Background(), st, st.List(), format.Options{ChunkBytes: 1000})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(lay.Meta)
	f.Add(lay.Meta[:len(lay.Meta)-3])
	f.Add([]byte("BRANDVID\x01\x02{}"))
	f.Fuzz(func(t *testing.T, meta []byte) {
		dec, err := Format{}.Open(meta)
		if err != nil {
			if !errors.Is(err, format.ErrInvalid) {
				t.Fatalf("an error of no kind: %v", err)
			}
			return
		}
		d := dec.(*Decoder).Dataset()
		for c := range d.Chunks {
			rs, bound := dec.Extent(c, nil)
			v := d.Videos[d.Chunks[c].Video]
			for _, r := range rs {
				if r.Off < 0 || r.End() > v.Size {
					t.Fatalf("chunk %d reads %+v of %d bytes", c, r, v.Size)
				}
			}
			if bound <= 0 || bound > format.MaxChunkBytes {
				t.Fatalf("chunk %d: bound %d", c, bound)
			}
		}
	})
}
