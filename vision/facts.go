package vision

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/transform"
)

// Facts is what laying a sample out needs of it under any rule: its text
// tokens and its images' stored sizes. A rule changes an image's vision
// tokens and the placeholder IDs, never the text's tokens (each piece
// between placeholders is tokenized on its own) nor an image's header:
// so a dataset's facts are read once per dataset version, tokenizer and
// pixel bound (a pass over every sample: headers and tokenization, no
// pixels), and every job over it, whatever its rule and seq, makes its
// items from them (Rule.Item) without reading a sample again. This is a
// vision job's counterpart of a text token dataset's document token
// counts (format.Tokens.DocTokens), which do not depend on seq either.
//
// A fault no rule mends is kept as the sample's: not a sample, its
// placeholders not its images, a text past the tokenizer's bound, an
// image whose header does not read (Images' Bad). Rule.Item turns each
// into the error Read gives under that rule, in Read's order.
type Facts struct {
	// Text is the sample's text tokens, its placeholders excluded.
	Text int
	// Images are the sample's images in order, up to and including the
	// first bad one (none is read after it, as Read reads none).
	Images []ImageFacts
	// Fault is a fault of the whole sample (FaultNone if none), Why its
	// words for the error that names the sample.
	Fault Fault
	Why   string
}

// ImageFacts is one image's stored size (its header's), or why its
// header does not read (Bad, then W and H are 0).
type ImageFacts struct {
	W, H int
	Bad  string
}

// A Fault is a sample's fault under every rule.
type Fault uint8

const (
	FaultNone         Fault = iota
	FaultSample             // ErrSample: not an image-text sample
	FaultPlaceholders       // ErrPlaceholders
	FaultText               // ErrTooLong: the text is past the tokenizer's bound
	numFaults
)

// faultErr is each fault's sentinel.
var faultErr = [numFaults]error{FaultSample: ErrSample, FaultPlaceholders: ErrPlaceholders, FaultText: ErrTooLong}

// Facts reads one sample's facts (name names it in errors). Only the
// Reader's Encoder and MaxPixels are used, not its Rule. A fault of the
// sample is in the Facts; the error is the tokenizer's own, not the
// sample's (the call fails under any policy).
func (r *Reader) Facts(name string, sample []byte) (Facts, error) {
	turns, images, err := members(sample)
	if err != nil {
		return Facts{Fault: FaultSample, Why: err.Error()}, nil
	}
	if why, long := longText(turns); long {
		return Facts{Fault: FaultText, Why: why}, nil
	}
	holes := 0
	for _, t := range turns {
		holes += bytes.Count(t.text, []byte(Placeholder))
	}
	if holes != 0 && holes != len(images) {
		return Facts{Fault: FaultPlaceholders, Why: fmt.Sprintf("%d %s in the text, %d images", holes, Placeholder, len(images))}, nil
	}
	var f Facts
	for _, im := range images {
		var fi ImageFacts
		switch w, h, err := transform.Dims(im.Data, r.MaxPixels); {
		case len(im.Data) == 0:
			fi.Bad = fmt.Sprintf("member %s is empty", im.Member)
		case err != nil:
			fi.Bad = fmt.Sprintf("member %s: %v", im.Member, err)
		default:
			fi.W, fi.H = w, h
		}
		f.Images = append(f.Images, fi)
		if fi.Bad != "" {
			return f, nil
		}
	}
	var ids []int32
	for _, t := range turns {
		for _, p := range bytes.Split(t.text, []byte(Placeholder)) {
			if ids, err = r.Encoder.Append(ids[:0], p); err != nil {
				if errors.Is(err, tokenize.ErrTextTooLong) {
					return Facts{Images: f.Images, Fault: FaultText, Why: fmt.Sprintf("tokenizing: %v", err)}, nil
				}
				return Facts{}, fmt.Errorf("tokenizing sample %s: %w", name, err)
			}
			f.Text += len(ids)
		}
	}
	return f, nil
}

// LongText is the facts of a sample whose member holds a text of n
// bytes, more than the tokenizer reads (tokenize.MaxTextBytes): what
// Facts says of it, before anything else, where an index reads the
// text's length alone (format.TextBound) and never the text.
func LongText(member string, n int64) Facts {
	return Facts{Fault: FaultText, Why: textTooLong(member, n)}
}

// Item is the item of a sample of facts f under r, in sequences of seq
// tokens: what Read and then Items make of the sample, or an error of
// the kind Read or Items gives it (which the caller names the sample
// in: Rule.Items does). Faults are checked in Read's order: the
// sample's members, a text past the tokenizer's bound (which Facts
// finds before anything else: LongText), its placeholders, each image
// in turn (a bad header, then the rule's bounds), its text, then its
// length against seq and the rule's cap.
func (r Rule) Item(f Facts, seq int) (Item, error) {
	if f.Fault == FaultSample || f.Fault == FaultPlaceholders {
		return Item{}, fmt.Errorf("%w: %s", faultErr[f.Fault], f.Why)
	}
	it := Item{Tokens: f.Text, Images: len(f.Images)}
	m2 := uint64(r.Merge * r.Merge)
	for _, im := range f.Images {
		if im.Bad != "" {
			return Item{}, fmt.Errorf("%w: %s", ErrBadImage, im.Bad)
		}
		w, h, err := r.Size(im.W, im.H)
		if err != nil {
			return Item{}, err
		}
		k := r.Tokens(w, h)
		it.Tokens += r.span(k)
		it.Vision += k
		p := uint64(k) * m2
		it.Encoder += p * p
	}
	if f.Fault == FaultText {
		return Item{}, fmt.Errorf("%w: %s", ErrTooLong, f.Why)
	}
	if it.Tokens > seq || r.MaxImages > 0 && it.Images > r.MaxImages {
		return Item{}, fmt.Errorf("%w: %d tokens and %d images; a sequence holds %d tokens and %d images (0: no cap), and a sample with images is never cut",
			ErrTooLong, it.Tokens, it.Images, seq, r.MaxImages)
	}
	return it, nil
}

// Refused reports whether every rule refuses the sample: a fault of the
// whole sample, or an image whose header does not read.
func (f Facts) Refused() bool {
	return f.Fault != FaultNone || len(f.Images) > 0 && f.Images[len(f.Images)-1].Bad != ""
}
