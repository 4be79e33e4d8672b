package vision

import (
	"archive/tar"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/brandgw/brand/transform"
)

// TestPixelsError: an image whose header reads but whose pixels do not
// fails the write as a *PixelsError naming its sample's place among the
// samples written (so that a caller skipping bad samples writes the
// sequence again without it), still ErrBadImage and the decoder's
// error; without that sample the sequence writes.
func TestPixelsError(t *testing.T) {
	good := pngOf(64, 48, 1)
	truncated := good[:len(good)/2]
	j := newJob(t, 20, 512, rule)
	read := func(name string, b []byte) Sample {
		s, err := j.reader.Read(name, b)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	samples := []Sample{
		read("a", tarOf("a.png", good, "a.txt", []byte("<image> a"))),
		read("b", tarOf("b.txt", []byte("no image"))),
		read("c", tarOf("c.png", truncated, "c.txt", []byte("<image> c"))),
	}
	err := j.writer.Write(tar.NewWriter(io.Discard), "k", samples)
	var px *PixelsError
	if !errors.As(err, &px) || px.Sample != 2 || px.Member != "c.png" || !errors.Is(err, ErrBadImage) || !errors.Is(err, transform.ErrDecode) || !strings.Contains(err.Error(), "c.png") {
		t.Fatalf("Write: %v (%+v); want a PixelsError of sample 2, c.png, ErrBadImage and transform.ErrDecode", err, px)
	}
	if err := j.writer.Write(tar.NewWriter(io.Discard), "k", samples[:2]); err != nil {
		t.Fatalf("Write without the sample: %v", err)
	}
}
