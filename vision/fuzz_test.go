package vision

import (
	"errors"
	"testing"
)

// FuzzRead: any bytes as a sample are read or refused with one of the
// package's kinds, never a panic; a sample read has one loss flag an ID
// and each image's span inside it, of the image's vision tokens, between
// its start and end. The seeds run in every go test.
func FuzzRead(f *testing.F) {
	img := pngOf(40, 60, 1)
	for _, s := range [][]byte{
		tarOf("a.txt", []byte("x <image> y"), "a.png", img),
		tarOf("a.json", []byte(`{"conversations": [{"from": "human", "value": "<image>"}, {"from": "gpt", "value": "ok"}]}`), "a.0.png", img),
		tarOf("a.txt", []byte("<image><image>"), "a.0.png", img, "a.1.png", img[:60]),
		tarOf("a.txt", []byte("no image")),
		[]byte("not a tar"),
		nil,
	} {
		f.Add(s)
	}
	j := newJob(f, 0, 512, rule)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := j.reader.Read("f", b)
		if err != nil {
			for _, k := range []error{ErrSample, ErrBadImage, ErrPlaceholders, ErrImageBounds} {
				if errors.Is(err, k) {
					return
				}
			}
			t.Fatalf("%v: none of the package's kinds", err)
		}
		r := j.reader.Rule
		if len(s.Loss) != len(s.IDs) {
			t.Fatalf("%d IDs, %d loss flags", len(s.IDs), len(s.Loss))
		}
		for _, im := range s.Images {
			sp := im.Span
			if sp.Start < 1 || sp.Start+sp.Len >= len(s.IDs) || sp.Len != r.Tokens(im.OutW, im.OutH) ||
				s.IDs[sp.Start-1] != r.Start || s.IDs[sp.Start+sp.Len] != r.End || countOf(s.IDs[sp.Start:sp.Start+sp.Len], r.Image) != sp.Len {
				t.Fatalf("span %+v misaligned in %d IDs", sp, len(s.IDs))
			}
		}
	})
}
