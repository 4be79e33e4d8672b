package vision

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// sentinels are the errors a sample can be refused with, for comparing
// two refusals by kind.
var sentinels = []error{ErrSample, ErrPlaceholders, ErrBadImage, ErrImageBounds, ErrTooLong}

func kindOf(err error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// TestFactsAreRead: a sample's facts, read once with no rule, make
// under every rule and seq the item Read makes of it under that rule
// (tokens, images, encoder cost, computed here from Read's spans), or
// the refusal Read or the length check gives it, of the same kind
// (Items names the sample: TestBadSamples). The samples: the corpus of captions and
// questions in several scripts, and every kind of bad sample, some bad
// only under some rules (an image under a patch, a sample over seq).
func TestFactsAreRead(t *testing.T) {
	good := pngOf(64, 48, 1)
	samples := [][]byte{
		tarOf("x.jpg", []byte("\xff\xd8\xffnot a jpeg at all"), "x.txt", []byte("a <image> b")),
		tarOf("x.png", []byte{}, "x.txt", []byte("<image> b")),
		tarOf("x.txt", []byte("look: <image>")),
		tarOf("x.0.png", good, "x.1.png", good, "x.txt", []byte("<image>")),
		tarOf("x.png", pngOf(20, 300, 2), "x.txt", []byte("<image>")),
		// Under a rule of patch 14 the first image is out of bounds and
		// the sample is refused as such; under a fixed size, as bad.
		tarOf("x.0.png", pngOf(20, 300, 2), "x.1.png", []byte("GIF89a"), "x.txt", []byte("<image><image>")),
		tarOf("x.png", pngOf(225, 224, 3), "x.txt", []byte("<image>")),
		tarOf("x.txt", bytes.Repeat([]byte("many words here "), 200)),
		tarOf("x.0.png", good, "x.1.png", good, "x.2.png", good, "x.3.png", good, "x.4.png", good, "x.txt", []byte("five")),
		tarOf("x.png", good),
		tarOf("x.0.png", good, "x.00.png", good, "x.txt", []byte("a")),
		tarOf("x.json", []byte(`{"conversations": [{"from": "human", "value": "<image> what?"}, {"from": "gpt", "value": "a dog"}]}`), "x.png", good),
	}
	for _, m := range corpus(120) {
		samples = append(samples, m.tar)
	}
	enc := model(t)
	v := enc.VocabSize()
	ids := strings.NewReplacer("IMAGE", strconv.Itoa(v), "START", strconv.Itoa(v+1), "END", strconv.Itoa(v+2))
	for _, spec := range []string{
		"min:3136,max:50176,patch:14,merge:2,image:IMAGE,start:START,end:END,images:4",
		"min:784,max:12544,patch:14,image:IMAGE",
		"size:56x28,patch:14,image:IMAGE,start:START,end:END",
		"size:448x448,patch:14,merge:2,image:IMAGE",
	} {
		r, err := ParseRule(ids.Replace(spec))
		if err != nil {
			t.Fatal(err)
		}
		rd := &Reader{Rule: r, Encoder: enc, MaxPixels: 224 * 224}
		for _, seq := range []int{40, 256, 4096} {
			for i, b := range samples {
				name := fmt.Sprintf("n%d", i)
				f, err := rd.Facts(name, b)
				if err != nil {
					t.Fatal(err)
				}
				got, gotErr := r.Item(f, seq)
				s, wantErr := rd.Read(name, b)
				var want Item
				if wantErr == nil {
					want = Item{Tokens: s.Tokens(), Images: len(s.Images)}
					for _, im := range s.Images {
						p := uint64(im.Span.Len * r.Merge * r.Merge)
						want.Encoder += p * p
						want.Vision += im.Span.Len
					}
					if want.Tokens > seq || r.MaxImages > 0 && want.Images > r.MaxImages {
						want, wantErr = Item{}, ErrTooLong
					}
				}
				if got != want || kindOf(gotErr) != kindOf(wantErr) {
					t.Fatalf("%s seq %d sample %d: facts make %+v, %v; Read makes %+v, %v", spec, seq, i, got, gotErr, want, wantErr)
				}
			}
		}
	}
}
