package vision

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/transform"
)

var (
	// ErrBadImage marks a sample whose image is missing (a member of no
	// bytes) or whose header does not decode, or claims more pixels than
	// the bound. (A placeholder without its image is ErrPlaceholders.)
	ErrBadImage = errkind.Named(errkind.Unprocessable, "bad_image", "vision: bad image")
	// ErrPlaceholders marks a text whose placeholders are not its
	// sample's images, one for one.
	ErrPlaceholders = errkind.New(errkind.Unprocessable, "vision: placeholders do not match the images")
	// ErrSample marks a sample that is not an image-text pair: not a tar
	// of members, no txt, two images of one place.
	ErrSample = errkind.New(errkind.Unprocessable, "vision: not an image-text sample")
	// ErrTooLong marks a sample of more tokens than a sequence holds, or
	// more images than a sequence may: images are never cut, so it is
	// refused or skipped, never split.
	ErrTooLong = errkind.New(errkind.Unprocessable, "vision: sample longer than a sequence")
)

// Placeholder is where a text puts an image: each occurrence, in order,
// stands for the sample's next image (LLaVA's convention). A text with
// none takes its images before it, as a caption follows its picture.
const Placeholder = "<image>"

// Encoder tokenizes text, as *tokenize.Model does: IDs appended to dst.
type Encoder interface {
	Append(dst []int32, text []byte) ([]int32, error)
}

// A Reader reads image-text samples into what a sequence holds of them.
// It is immutable and safe for concurrent use if its Encoder is.
type Reader struct {
	Rule    Rule
	Encoder Encoder
	// MaxPixels bounds an image's pixels as its header claims them
	// (transform.Options.MaxPixels; 0 is transform's default).
	MaxPixels int64
}

// A Sample is one image-text sample as a sequence holds it: its token
// IDs (the text's, with each image's span of vision tokens in place of
// its placeholder), the loss mask over them (1 for a text token of a
// txt or of an assistant's turn, 0 for another turn's and for a vision
// token), and its images.
type Sample struct {
	IDs    []int32
	Loss   []uint8
	Images []Image
}

// Tokens is the sample's length in a sequence.
func (s Sample) Tokens() int { return len(s.IDs) }

// An Image is one image of a sample: its member's bytes, its size as
// stored and as resized, and its span in the sample's IDs.
type Image struct {
	Member     string
	Data       []byte
	W, H       int // as stored (its header's)
	OutW, OutH int // as resized: Rule.Size
	// Span is the image's placeholder tokens in the sample (Start and
	// End excluded): Rule.Tokens(OutW, OutH) of them.
	Span Span
}

// A Span is a run of tokens: [Start, Start+Len).
type Span struct{ Start, Len int }

// Read reads one sample: sample is its tar members as the read stage
// hands them over (KEY.jpg and KEY.txt, or KEY.json a conversation;
// several images as KEY.0.jpg, KEY.1.png, ... in that order). name names it in errors. A sample that
// is not one wraps ErrSample, ErrBadImage, ErrPlaceholders or
// ErrImageBounds; Read does not decode pixels (Write does), only
// headers.
func (r *Reader) Read(name string, sample []byte) (Sample, error) {
	turns, images, err := members(sample)
	if err != nil {
		return Sample{}, fmt.Errorf("%w (sample %s)", err, name)
	}
	s, err := r.build(turns, images)
	if err != nil {
		return Sample{}, fmt.Errorf("%w (sample %s)", err, name)
	}
	return s, nil
}

// A turn is a run of a sample's text and the loss its tokens take: a
// txt member is one turn of loss 1; a conversation, one turn a message,
// of loss 1 for the assistant's alone. member is the member it is of.
type turn struct {
	text   []byte
	loss   uint8
	member string
}

// longText is a sample's first turn longer than the tokenizer reads
// (tokenize.MaxTextBytes), if any: what an index refuses reading its
// length alone (LongText), so Read and Facts refuse it first too.
func longText(turns []turn) (string, bool) {
	for _, t := range turns {
		if len(t.text) > tokenize.MaxTextBytes {
			return textTooLong(t.member, int64(len(t.text))), true
		}
	}
	return "", false
}

// textTooLong says why a text of n bytes of member is refused.
func textTooLong(member string, n int64) string {
	return fmt.Sprintf("member %s holds a text of %d bytes, more than a text may be (%d: tokenize.MaxTextBytes)", member, n, tokenize.MaxTextBytes)
}

// build tokenizes the turns around their placeholders and sizes the
// images.
func (r *Reader) build(turns []turn, images []Image) (Sample, error) {
	if why, long := longText(turns); long {
		return Sample{}, fmt.Errorf("%w: %s", ErrTooLong, why)
	}
	holes := 0
	for _, t := range turns {
		holes += bytes.Count(t.text, []byte(Placeholder))
	}
	first := 0 // images before the first turn: a text with no placeholder
	switch {
	case holes == 0:
		first = len(images)
	case holes != len(images):
		return Sample{}, fmt.Errorf("%w: %d %s in the text, %d images", ErrPlaceholders, holes, Placeholder, len(images))
	}
	var s Sample
	for i := range images {
		im := &images[i]
		if len(im.Data) == 0 {
			return Sample{}, fmt.Errorf("%w: member %s is empty", ErrBadImage, im.Member)
		}
		w, h, err := transform.Dims(im.Data, r.MaxPixels)
		if err != nil {
			return Sample{}, fmt.Errorf("%w: member %s: %w", ErrBadImage, im.Member, err)
		}
		im.W, im.H = w, h
		if im.OutW, im.OutH, err = r.Rule.Size(w, h); err != nil {
			return Sample{}, fmt.Errorf("%w (member %s)", err, im.Member)
		}
	}
	next := 0
	image := func() {
		im := &images[next]
		next++
		k := r.Rule.Tokens(im.OutW, im.OutH)
		if r.Rule.Start >= 0 {
			s.IDs = append(s.IDs, r.Rule.Start)
		}
		im.Span = Span{Start: len(s.IDs), Len: k}
		s.IDs = appendN(s.IDs, r.Rule.Image, k)
		if r.Rule.End >= 0 {
			s.IDs = append(s.IDs, r.Rule.End)
		}
		s.Loss = appendN(s.Loss, 0, len(s.IDs)-len(s.Loss))
	}
	for range first {
		image()
	}
	for _, t := range turns {
		parts := bytes.Split(t.text, []byte(Placeholder))
		for i, p := range parts {
			n := len(s.IDs)
			var err error
			if s.IDs, err = r.Encoder.Append(s.IDs, p); err != nil {
				if errors.Is(err, tokenize.ErrTextTooLong) { // the sample's fault, not the server's
					return Sample{}, fmt.Errorf("%w: tokenizing: %v", ErrTooLong, err)
				}
				return Sample{}, fmt.Errorf("tokenizing: %w", err)
			}
			s.Loss = appendN(s.Loss, t.loss, len(s.IDs)-n)
			if i < len(parts)-1 {
				image()
			}
		}
	}
	s.Images = images
	return s, nil
}

func appendN[T any](dst []T, v T, n int) []T {
	for range n {
		dst = append(dst, v)
	}
	return dst
}

// members splits a sample's tar into its turns of text and its images,
// in order. A member's kind is its name's extension after the key
// (WebDataset's rule: from the first dot of the base name): txt (the
// text), json (a conversation, read only without a txt: beside one, a
// json is metadata, as LAION's shards hold); jpg, jpeg or png (the
// sample's one image); N.jpg, N.jpeg or N.png (image N). Other members
// are left alone.
func members(sample []byte) ([]turn, []Image, error) {
	var turns []turn
	var txt, js []byte // a txt's text; a json's conversation, unless a txt is there
	var txtName, jsName string
	type numbered struct {
		n  int
		im Image
	}
	var ims []numbered
	tr := tar.NewReader(bytes.NewReader(sample))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: its tar members: %v", ErrSample, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		base := path.Base(h.Name)
		_, ext, ok := strings.Cut(base, ".")
		if !ok {
			continue
		}
		n, kind := 0, ext
		if num, rest, ok := strings.Cut(ext, "."); ok {
			v, err := strconv.Atoi(num)
			if err != nil || v < 0 || v > 1<<20 {
				continue
			}
			n, kind = v, rest
		}
		switch kind {
		case "txt", "json":
			if ext != kind {
				continue
			}
			if kind == "txt" && txt != nil || kind == "json" && js != nil {
				return nil, nil, fmt.Errorf("%w: more than one %s member", ErrSample, kind)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: member %s: %v", ErrSample, h.Name, err)
			}
			if kind == "txt" {
				txt, txtName = b, h.Name
			} else {
				js, jsName = b, h.Name
			}
		case "jpg", "jpeg", "png":
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: member %s: %v", ErrSample, h.Name, err)
			}
			ims = append(ims, numbered{n, Image{Member: h.Name, Data: b}})
		}
	}
	switch {
	case txt != nil:
		turns = []turn{{text: txt, loss: 1, member: txtName}}
	case js != nil:
		var err error
		if turns, err = conversation(js); err != nil {
			return nil, nil, fmt.Errorf("%w: member %s: %w", ErrSample, jsName, err)
		}
		for i := range turns {
			turns[i].member = jsName
		}
	default:
		return nil, nil, fmt.Errorf("%w: no txt or json member", ErrSample)
	}
	slices.SortStableFunc(ims, func(a, b numbered) int { return a.n - b.n })
	out := make([]Image, len(ims))
	for i, x := range ims {
		if i > 0 && ims[i-1].n == x.n {
			return nil, nil, fmt.Errorf("%w: members %s and %s are one image", ErrSample, ims[i-1].im.Member, x.im.Member)
		}
		out[i] = x.im
	}
	return turns, out, nil
}

// conversation reads a json member's turns: LLaVA's
// {"conversations": [{"from": "human", "value": "<image>\n…"}, {"from":
// "gpt", "value": "…"}]}, the same list under "messages" with "role" and
// "content" as Hugging Face chat datasets write it, or the list alone
// (a Parquet column of such structs, as format/parquet serves it). The
// assistant's turns ("gpt", "assistant") take loss 1; every other's
// ("human", "user", "system") 0. The values are tokenized as they are,
// one after the other: a chat template, where a model needs one, is the
// dataset writer's to apply to the values.
func conversation(b []byte) ([]turn, error) {
	type message struct {
		From    string  `json:"from"`
		Value   *string `json:"value"`
		Role    string  `json:"role"`
		Content *string `json:"content"`
	}
	var msgs []message
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(b, &msgs); err != nil {
			return nil, fmt.Errorf("not a conversation: %v", err)
		}
	} else {
		var doc struct {
			Conversations []message `json:"conversations"`
			Messages      []message `json:"messages"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("not a conversation: %v", err)
		}
		if len(doc.Conversations) > 0 && len(doc.Messages) > 0 {
			return nil, fmt.Errorf("a conversation has turns under \"conversations\" or \"messages\", not both")
		}
		msgs = append(doc.Conversations, doc.Messages...)
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("a conversation of no turns")
	}
	turns := make([]turn, len(msgs))
	for i, m := range msgs {
		who, text := m.From, m.Value
		if who == "" && text == nil {
			who, text = m.Role, m.Content
		}
		if text == nil {
			return nil, fmt.Errorf("turn %d has no text (value or content)", i)
		}
		switch who {
		case "gpt", "assistant":
			turns[i] = turn{text: []byte(*text), loss: 1}
		case "human", "user", "system":
			turns[i] = turn{text: []byte(*text)}
		default:
			return nil, fmt.Errorf("turn %d is of %q: human, user, system, gpt or assistant", i, who)
		}
	}
	return turns, nil
}
