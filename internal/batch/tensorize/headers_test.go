package tensorize

import (
	"archive/tar"
	"bytes"
	"maps"
	"strings"
	"testing"
	"time"
)

// headerNames are member names of every form a header takes: short, 100
// bytes, over 100 split into ustar's prefix, over 100 with no split (PAX),
// non-ASCII (PAX), a NUL and a directory's (refused).
var headerNames = []string{
	"k.npy", strings.Repeat("k", 96) + ".npy", strings.Repeat("p/", 60) + "k.npy", strings.Repeat("k", 300) + ".npy",
	"ñandú.npy", "nul\x00.npy", "dir/",
}

// TestMemberHeaderIsArchiveTars: the clip stage's own members' headers
// (memberHeader) are byte for byte what it wrote through a tar.Writer
// before they went through internal/codec/ustar, refused alike.
func TestMemberHeaderIsArchiveTars(t *testing.T) {
	for _, name := range headerNames {
		for _, size := range []int{0, 513, 9 << 30} {
			var want bytes.Buffer
			terr := tar.NewWriter(&want).WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(size), Mode: 0o644})
			got, err := memberHeader(name, size)
			if (err != nil) != (terr != nil) || err == nil && !bytes.Equal(got, want.Bytes()) {
				t.Errorf("%q, %d bytes: %d bytes, %v; archive/tar: %d bytes, %v", name, size, len(got), err, want.Len(), terr)
			}
		}
	}
}

// tensorHeaderBefore is tensorHeader as it was written through a
// tar.Writer of its own: the reference.
func tensorHeaderBefore(img *tar.Header, name string, size int) ([]byte, error) {
	h := *img
	h.Name, h.Size = name, int64(size)
	if h.PAXRecords != nil {
		h.PAXRecords = maps.Clone(h.PAXRecords)
		delete(h.PAXRecords, "path")
		delete(h.PAXRecords, "size")
	}
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	if err := w.WriteHeader(&h); err != nil {
		if h.Format == tar.FormatUnknown {
			return nil, err
		}
		buf.Reset()
		w = tar.NewWriter(&buf)
		h.Format = tar.FormatUnknown
		if err := w.WriteHeader(&h); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// TestTensorHeaderIsArchiveTars: an image's tensor header (tensorHeader)
// is byte for byte what it was through a tar.Writer of its own, for
// images whose headers are ustar, PAX (an owner's name, a time to the
// nanosecond, records of its own, a long name) and GNU, at sizes ustar
// holds and past them.
func TestTensorHeaderIsArchiveTars(t *testing.T) {
	mtime := time.Unix(1700000000, 0)
	var images []*tar.Header
	for _, h := range []tar.Header{
		{Name: "k.png", Mode: 0o644, ModTime: mtime, Format: tar.FormatUSTAR},
		{Name: "k.png", Mode: 0o600, Uid: 1000, Gid: 1000, Uname: "u", Gname: "g", ModTime: mtime, Format: tar.FormatUSTAR},
		{Name: "k.png", Mode: 0o644, Uname: "ünïcode", ModTime: mtime.Add(123456789), PAXRecords: map[string]string{"comment": "x"}, Format: tar.FormatPAX},
		{Name: strings.Repeat("k", 150) + ".png", Mode: 0o644, ModTime: mtime, Format: tar.FormatPAX},
		{Name: "k.png", Mode: 0o644, ModTime: mtime, AccessTime: mtime, Format: tar.FormatGNU},
	} {
		h.Typeflag, h.Size = tar.TypeReg, 3
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte("abc"))
		tw.Close()
		img, err := tar.NewReader(&b).Next()
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, img)
	}
	for i, img := range images {
		for _, name := range headerNames {
			for _, size := range []int{0, 513, 9 << 30} {
				want, terr := tensorHeaderBefore(img, name, size)
				got, err := tensorHeader(img, name, size)
				if (err != nil) != (terr != nil) || !bytes.Equal(got, want) {
					t.Errorf("image %d (%v), %q, %d bytes: %d bytes, %v; before: %d bytes, %v", i, img.Format, name, size, len(got), err, len(want), terr)
				}
			}
		}
	}
}
