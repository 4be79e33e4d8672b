package vision

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/tokenize"
)

// int32sOfLoss widens a loss mask for countOf.
func int32sOfLoss(l []uint8) []int32 {
	out := make([]int32, len(l))
	for i, x := range l {
		out[i] = int32(x)
	}
	return out
}

// TestConversation: a json member's turns, LLaVA's and the messages
// form, are tokenized one after the other with their placeholders
// expanded across turns in order; the loss mask is 1 on the assistant's
// text alone. Built by the test from the turns' texts.
func TestConversation(t *testing.T) {
	j := newJob(t, 0, 512, rule)
	r, enc := j.reader.Rule, model(t)
	img0, img1 := pngOf(60, 90, 1), pngOf(120, 40, 2)
	type turnT struct {
		text      string
		assistant bool
	}
	turns := []turnT{{"<image>\nWhat is here?", false}, {"A cat.", true}, {"And <image> here?", false}, {"A dog, 🐕.", true}}
	for _, doc := range []string{
		`{"conversations": [{"from": "human", "value": "<image>\nWhat is here?"}, {"from": "gpt", "value": "A cat."},
		  {"from": "human", "value": "And <image> here?"}, {"from": "gpt", "value": "A dog, 🐕."}]}`,
		`{"messages": [{"role": "user", "content": "<image>\nWhat is here?"}, {"role": "assistant", "content": "A cat."},
		  {"role": "user", "content": "And <image> here?"}, {"role": "assistant", "content": "A dog, 🐕."}]}`,
	} {
		s, err := j.reader.Read("c", tarOf("c.json", []byte(doc), "c.1.png", img1, "c.0.png", img0))
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		var loss []uint8
		sizes := [][2]int{{60, 90}, {120, 40}}
		next := 0
		for _, tt := range turns {
			for i, p := range strings.Split(tt.text, Placeholder) {
				got, err := enc.Encode([]byte(p))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, got...)
				for range got {
					loss = append(loss, map[bool]uint8{true: 1, false: 0}[tt.assistant])
				}
				if i < strings.Count(tt.text, Placeholder) {
					w, h, _ := r.Size(sizes[next][0], sizes[next][1])
					next++
					ids = append(ids, r.Start)
					for range r.Tokens(w, h) {
						ids = append(ids, r.Image)
					}
					ids = append(ids, r.End)
					for len(loss) < len(ids) {
						loss = append(loss, 0)
					}
				}
			}
		}
		if !slices.Equal(s.IDs, ids) || !slices.Equal(s.Loss, loss) {
			t.Fatalf("%.40s…: IDs or loss differ from the turns' own expansion\n got %v\nwant %v\n got %v\nwant %v", doc, s.IDs, ids, s.Loss, loss)
		}
		if len(s.Images) != 2 || s.Images[0].Member != "c.0.png" || s.Images[1].Member != "c.1.png" {
			t.Fatalf("images %+v: want c.0.png then c.1.png", s.Images)
		}
		for _, im := range s.Images {
			if s.IDs[im.Span.Start-1] != r.Start || countOf(s.IDs[im.Span.Start:im.Span.Start+im.Span.Len], r.Image) != r.Tokens(im.OutW, im.OutH) {
				t.Fatalf("span %+v is not its image's", im.Span)
			}
		}
	}
	for _, bad := range []string{
		`not json`,
		`{}`,
		`{"conversations": [{"from": "robot", "value": "x"}]}`,
		`{"conversations": [{"from": "human"}]}`,
		`{"conversations": [{"from": "human", "value": "x"}], "messages": [{"role": "user", "content": "y"}]}`,
	} {
		if _, err := j.reader.Read("c", tarOf("c.json", []byte(bad))); !errors.Is(err, ErrSample) {
			t.Errorf("%s: %v; want ErrSample", bad, err)
		}
	}
	// Beside a txt, a json is metadata (LAION's shards): the txt is the
	// text, all of it learnt.
	s, err := j.reader.Read("c", tarOf("c.json", []byte(`{"url": "http://x", "width": 64}`), "c.txt", []byte("a caption"), "c.jpg", jpegOf(img0)))
	want, _ := enc.Encode([]byte("a caption"))
	if err != nil || !slices.Equal(s.IDs[len(s.IDs)-len(want):], want) || countOf(int32sOfLoss(s.Loss), 1) != len(want) || len(s.Images) != 1 {
		t.Errorf("a txt beside a json: %v, %v; want the txt's %v after the image, its loss 1", err, s.IDs, want)
	}
	for _, two := range [][]byte{tarOf("c.txt", []byte("a"), "c.txt", []byte("b")), tarOf("c.json", []byte("[]"), "c.json", []byte("[]"))} {
		if _, err := j.reader.Read("c", two); !errors.Is(err, ErrSample) {
			t.Errorf("two text members: %v; want ErrSample", err)
		}
	}
	// A text past the tokenizer's bound is the sample's: too long.
	if _, err := j.reader.Read("c", tarOf("c.txt", bytes.Repeat([]byte("a"), tokenize.MaxTextBytes+1))); !errors.Is(err, ErrTooLong) {
		t.Errorf("a text past tokenize.MaxTextBytes: %v; want ErrTooLong", err)
	}
}
