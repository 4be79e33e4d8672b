package vision

import (
	"errors"
	"fmt"
)

// A Policy is what a bad sample does to an epoch, as the server's
// --on-bad-image says of a transform job's images: Fail the epoch with
// the sample's error, or Skip the sample and count it (Skipped).
type Policy uint8

const (
	Fail Policy = iota
	Skip
)

// Skipped counts the samples an epoch left out under Skip, by why.
type Skipped struct {
	// BadImage: an image empty, or whose header does not decode or
	// claims more pixels than the bound (ErrBadImage).
	BadImage int
	// Bounds: an image the rule cannot size (ErrImageBounds).
	Bounds int
	// Placeholders: a text whose placeholders are not its images
	// (ErrPlaceholders).
	Placeholders int
	// TooLong: more tokens than seq, or more images than the rule's
	// cap (ErrTooLong).
	TooLong int
	// NotSample: no txt member, or members that do not read
	// (ErrSample).
	NotSample int
}

// Total is the samples skipped.
func (s Skipped) Total() int { return s.BadImage + s.Bounds + s.Placeholders + s.TooLong + s.NotSample }

// A Source hands a job's samples over by ID: the sample's tar members
// and its name for errors.
type Source func(id int) (name string, sample []byte, err error)

// Items reads samples [0, n) of src and returns each one's Item, for
// NewEpoch: its tokens and images as Read makes them. It is Facts of
// each sample, then Rule.Items: a sample Read refuses, or one longer
// than seq or of more images than the rule's cap, fails the call under
// Fail (its error, naming it) and is an Item of no tokens under Skip,
// counted by why. An error of src itself (the store) or of the
// tokenizer fails the call under either policy.
func (r *Reader) Items(src Source, n, seq int, policy Policy) ([]Item, Skipped, error) {
	facts := make([]Facts, n)
	names := make([]string, n)
	for id := range n {
		name, b, err := src(id)
		if err != nil {
			return nil, Skipped{}, err
		}
		if facts[id], err = r.Facts(name, b); err != nil {
			return nil, Skipped{}, err
		}
		names[id] = name
	}
	return r.Rule.Items(func(id int) Facts { return facts[id] }, func(id int) string { return names[id] }, n, seq, policy)
}

// Items makes the items of samples [0, n) from their facts (Rule.Item),
// under policy: a sample's error fails the call under Fail, naming the
// sample (name, asked of that sample alone), and makes it an Item of no
// tokens under Skip, counted by why.
func (r Rule) Items(facts func(id int) Facts, name func(id int) string, n, seq int, policy Policy) ([]Item, Skipped, error) {
	items := make([]Item, n)
	var sk Skipped
	for id := range n {
		it, err := r.Item(facts(id), seq)
		if err == nil {
			items[id] = it
			continue
		}
		if policy == Fail {
			return nil, Skipped{}, fmt.Errorf("%w (sample %s)", err, name(id))
		}
		switch {
		case errors.Is(err, ErrBadImage):
			sk.BadImage++
		case errors.Is(err, ErrImageBounds):
			sk.Bounds++
		case errors.Is(err, ErrPlaceholders):
			sk.Placeholders++
		case errors.Is(err, ErrTooLong):
			sk.TooLong++
		case errors.Is(err, ErrSample):
			sk.NotSample++
		default:
			return nil, Skipped{}, err
		}
	}
	return items, sk, nil
}

// ReadSequence reads sequence q's samples from src for Writer.Members,
// each checked against its item: a sample that reads otherwise than it
// was counted wraps ErrSequence, so that no span is ever written apart
// from its image.
func (r *Reader) ReadSequence(src Source, q Sequence, items []Item) ([]Sample, error) {
	out := make([]Sample, len(q.Samples))
	for i, id := range q.Samples {
		name, b, err := src(id)
		if err != nil {
			return nil, err
		}
		s, err := r.Read(name, b)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSequence, err)
		}
		if got := r.item(s); got != items[id] {
			return nil, fmt.Errorf("%w: sample %s reads as %+v, laid out as %+v", ErrSequence, name, got, items[id])
		}
		out[i] = s
	}
	return out, nil
}

// item is what packing and balancing know of s.
func (r *Reader) item(s Sample) Item {
	it := Item{Tokens: s.Tokens(), Images: len(s.Images)}
	m2 := uint64(r.Rule.Merge * r.Rule.Merge)
	for _, im := range s.Images {
		p := uint64(im.Span.Len) * m2
		it.Encoder += p * p
		it.Vision += im.Span.Len
	}
	return it
}
