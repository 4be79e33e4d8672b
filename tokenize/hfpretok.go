package tokenize

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/text/unicode/norm"
)

// A tokenizer.json's normalizer and pre-tokenizer, as the reference
// applies them (normalizers/, pre_tokenizers/ and
// tokenizer/normalizer.rs of huggingface/tokenizers).

// hfComponent is a normalizer's or pre-tokenizer's object: the fields of
// every type this package reads.
type hfComponent struct {
	Type           string            `json:"type"`
	Normalizers    []jsontext.Value  `json:"normalizers"`
	PreTokenizers  []jsontext.Value  `json:"pretokenizers"`
	Pattern        map[string]string `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         *bool             `json:"invert"`
	AddPrefixSpace *bool             `json:"add_prefix_space"`
	TrimOffsets    *bool             `json:"trim_offsets"`
	UseRegex       *bool             `json:"use_regex"`
	Individual     *bool             `json:"individual_digits"`
}

// missing refuses a component without a field the reference requires
// (its serde structs have no default for it).
func missing(field, name string) error {
	return fmt.Errorf("%w: tokenizer.json: %s has no %s", ErrNotModel, field, name)
}

func unmarshalComponent(v jsontext.Value, field string) (*hfComponent, error) {
	var c hfComponent
	if err := json.Unmarshal(v, &c, jsontext.AllowDuplicateNames(true), json.RejectUnknownMembers(false)); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json: %s: %v", ErrNotModel, field, err)
	}
	return &c, nil
}

func isNull(v jsontext.Value) bool { return len(v) == 0 || string(v) == "null" }

// parseNormalizer reads the normalizer: none, a Unicode normal form, or a
// Sequence of them (flattened).
func parseNormalizer(v jsontext.Value, field string, out *[]norm.Form) error {
	if isNull(v) {
		return nil
	}
	c, err := unmarshalComponent(v, field)
	if err != nil {
		return err
	}
	switch c.Type {
	case "NFC":
		*out = append(*out, norm.NFC)
	case "NFKC":
		*out = append(*out, norm.NFKC)
	case "NFD":
		*out = append(*out, norm.NFD)
	case "NFKD":
		*out = append(*out, norm.NFKD)
	case "Sequence":
		for i, n := range c.Normalizers {
			if len(*out) >= maxComponents {
				return fmt.Errorf("%w: tokenizer.json: %s: more than %d steps", ErrTooLarge, field, maxComponents)
			}
			if err := parseNormalizer(n, fmt.Sprintf("%s.normalizers[%d]", field, i), out); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%w: tokenizer.json: %s.type %q (this package normalizes with NFC, NFD, NFKC, NFKD and Sequence of them)", ErrUnsupported, field, c.Type)
	}
	return nil
}

// normalize applies the normal forms in order.
func normalize(forms []norm.Form, s string) string {
	for _, f := range forms {
		s = f.String(s)
	}
	return s
}

// preStep is one splitting pre-tokenizer: it cuts a piece of text into
// pieces, passing each non-empty one to yield in order.
type preStep interface {
	split(s string, yield func(string)) error
}

// byteLevel is the ByteLevel pre-tokenizer, which must be the last step:
// its optional prefix space and GPT-2's split, after which the model
// sees each piece's bytes through the byte-level alphabet.
type byteLevel struct {
	addPrefixSpace bool
	regex          *regexSplit // GPT-2's pattern; nil without use_regex
}

// parsePreTokenizer reads the pre-tokenizer: the steps before ByteLevel,
// and ByteLevel's options. A pre-tokenizer without ByteLevel last is
// refused: the model would see characters, not bytes.
func parsePreTokenizer(v jsontext.Value) ([]preStep, byteLevel, error) {
	const field = "pre_tokenizer"
	if isNull(v) {
		return nil, byteLevel{}, fmt.Errorf("%w: tokenizer.json: %s is null (byte-level BPE needs ByteLevel)", ErrUnsupported, field)
	}
	var flat []struct {
		c     *hfComponent
		field string
	}
	var walk func(v jsontext.Value, field string) error
	walk = func(v jsontext.Value, field string) error {
		c, err := unmarshalComponent(v, field)
		if err != nil {
			return err
		}
		if c.Type != "Sequence" {
			if len(flat) >= maxComponents {
				return fmt.Errorf("%w: tokenizer.json: %s: more than %d steps", ErrTooLarge, field, maxComponents)
			}
			flat = append(flat, struct {
				c     *hfComponent
				field string
			}{c, field})
			return nil
		}
		for i, p := range c.PreTokenizers {
			if err := walk(p, fmt.Sprintf("%s.pretokenizers[%d]", field, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(v, field); err != nil {
		return nil, byteLevel{}, err
	}
	var steps []preStep
	var bl byteLevel
	for i, f := range flat {
		c := f.c
		if c.Type == "ByteLevel" {
			if c.AddPrefixSpace == nil {
				return nil, bl, missing(f.field, "add_prefix_space")
			}
			if c.TrimOffsets == nil {
				return nil, bl, missing(f.field, "trim_offsets")
			}
			if i != len(flat)-1 {
				return nil, bl, fmt.Errorf("%w: tokenizer.json: %s: ByteLevel followed by another pre-tokenizer", ErrUnsupported, f.field)
			}
			bl.addPrefixSpace = *c.AddPrefixSpace
			if c.UseRegex == nil || *c.UseRegex {
				bl.regex = &regexSplit{match: knownPatterns[gpt2Pattern], behavior: "Isolated"}
			}
			return steps, bl, nil
		}
		step, err := parseSplitStep(c, f.field)
		if err != nil {
			return nil, bl, err
		}
		steps = append(steps, step)
	}
	return nil, bl, fmt.Errorf("%w: tokenizer.json: %s has no ByteLevel step (this package encodes byte-level BPE)", ErrUnsupported, field)
}

func parseSplitStep(c *hfComponent, field string) (preStep, error) {
	switch c.Type {
	case "Split":
		if c.Invert == nil {
			return nil, missing(field, "invert")
		}
		if !validBehavior(c.Behavior) {
			return nil, fmt.Errorf("%w: tokenizer.json: %s.behavior %q", ErrNotModel, field, c.Behavior)
		}
		if len(c.Pattern) != 1 {
			return nil, fmt.Errorf("%w: tokenizer.json: %s.pattern is not {\"Regex\": …} or {\"String\": …}", ErrNotModel, field)
		}
		r := &regexSplit{behavior: c.Behavior, invert: *c.Invert}
		if s, ok := c.Pattern["String"]; ok {
			if s == "" {
				return nil, fmt.Errorf("%w: tokenizer.json: %s.pattern.String is empty", ErrUnsupported, field)
			}
			r.match = literalMatcher(s)
		} else if p, ok := c.Pattern["Regex"]; ok {
			if r.match = knownPatterns[p]; r.match == nil {
				var err error
				if r.re, err = compileFallback(p, field); err != nil {
					return nil, err
				}
			}
		} else {
			return nil, fmt.Errorf("%w: tokenizer.json: %s.pattern is not {\"Regex\": …} or {\"String\": …}", ErrNotModel, field)
		}
		return r, nil
	case "Digits":
		if c.Individual == nil {
			return nil, missing(field, "individual_digits")
		}
		// char::is_numeric, one match a character.
		r := &regexSplit{match: numericMatcher, behavior: "Contiguous"}
		if *c.Individual {
			r.behavior = "Isolated"
		}
		return r, nil
	default:
		return nil, fmt.Errorf("%w: tokenizer.json: %s.type %q (this package pre-tokenizes with Split, Digits, ByteLevel and Sequence of them)", ErrUnsupported, field, c.Type)
	}
}

func validBehavior(b string) bool {
	switch b {
	case "Removed", "Isolated", "Contiguous", "MergedWithPrevious", "MergedWithNext":
		return true
	}
	return false
}

// matcher finds the next match in s at or after from: its bounds, or
// ok false. It never returns an empty match.
type matcher func(s string, from int) (start, end int, ok bool)

// regexSplit is the Split pre-tokenizer (and Digits, and ByteLevel's
// regex): the reference's Pattern::find_matches, which alternates
// non-matches and matches over the whole piece, then the behavior's
// fold of them (NormalizedString::split).
type regexSplit struct {
	match    matcher
	re       *regexp2.Regexp // a pattern not matched by hand; match is nil
	behavior string
	invert   bool
}

// matchTimeout bounds one search of a pattern matched by regexp2: a
// backtracking pattern that would search longer fails the text.
const matchTimeout = 2 * time.Second

// compileFallback compiles a Split's pattern that is not matched by
// hand with regexp2 (.NET's syntax and semantics: Unicode classes,
// lookaround, backtracking alternation, as Oniguruma's), its time
// bounded. A pattern that matches the empty string is refused: the two
// engines step past an empty match differently.
func compileFallback(p, field string) (*regexp2.Regexp, error) {
	re, err := regexp2.Compile(p, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json: %s.pattern.Regex %q: %v", ErrUnsupported, field, p, err)
	}
	re.MatchTimeout = matchTimeout
	if m, err := re.FindStringMatch(""); err != nil || m != nil {
		return nil, fmt.Errorf("%w: tokenizer.json: %s.pattern.Regex %q matches the empty string", ErrUnsupported, field, p)
	}
	return re, nil
}

// fallbackMatcher finds the matches of re in s at once, as a matcher.
func fallbackMatcher(re *regexp2.Regexp, s string) (matcher, error) {
	idx, err := re.FindAllStringIndex(s, -1)
	if err != nil {
		return nil, fmt.Errorf("%w: pattern %q: %v", ErrPattern, re.String(), err)
	}
	for _, m := range idx {
		if m[0] == m[1] {
			return nil, fmt.Errorf("%w: pattern %q matched the empty string at byte %d", ErrPattern, re.String(), m[0])
		}
	}
	k := 0
	return func(_ string, from int) (int, int, bool) {
		for k < len(idx) && idx[k][0] < from {
			k++
		}
		if k == len(idx) {
			return 0, 0, false
		}
		return idx[k][0], idx[k][1], true
	}, nil
}

type span struct {
	start, end int
	match      bool
}

func (r *regexSplit) split(s string, yield func(string)) error {
	if s == "" {
		return nil
	}
	match := r.match
	if r.re != nil {
		var err error
		if match, err = fallbackMatcher(r.re, s); err != nil {
			return err
		}
	}
	// Isolated and Removed, the behaviors models ship, need no list.
	if r.behavior == "Isolated" || r.behavior == "Removed" {
		remove := r.behavior == "Removed"
		emit := func(a, b int, m bool) {
			if r.invert {
				m = !m
			}
			if a < b && !(remove && m) {
				yield(s[a:b])
			}
		}
		prev := 0
		for prev < len(s) {
			a, b, ok := match(s, prev)
			if !ok {
				break
			}
			emit(prev, a, false)
			emit(a, b, true)
			prev = b
		}
		emit(prev, len(s), false)
		return nil
	}
	var spans []span
	prev := 0
	for prev < len(s) {
		a, b, ok := match(s, prev)
		if !ok {
			break
		}
		if a > prev {
			spans = append(spans, span{prev, a, r.invert})
		}
		spans = append(spans, span{a, b, !r.invert})
		prev = b
	}
	if prev < len(s) {
		spans = append(spans, span{prev, len(s), r.invert})
	}
	var out []span
	switch r.behavior {
	case "Contiguous":
		prevMatch := false
		for _, sp := range spans {
			if sp.match == prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, sp)
			}
			prevMatch = sp.match
		}
	case "MergedWithPrevious":
		prevMatch := false
		for _, sp := range spans {
			if sp.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, sp)
			}
			prevMatch = sp.match
		}
	case "MergedWithNext":
		prevMatch := false
		for i := len(spans) - 1; i >= 0; i-- {
			sp := spans[i]
			if sp.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].start = sp.start
			} else {
				out = append(out, sp)
			}
			prevMatch = sp.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	for _, sp := range out {
		if sp.start < sp.end {
			yield(s[sp.start:sp.end])
		}
	}
	return nil
}

// literalMatcher is a Split's String pattern (the reference escapes it
// into a regex).
func literalMatcher(lit string) matcher {
	return func(s string, from int) (int, int, bool) {
		i := strings.Index(s[from:], lit)
		if i < 0 {
			return 0, 0, false
		}
		return from + i, from + i + len(lit), true
	}
}

// numericMatcher matches one character for which Rust's char::is_numeric
// holds (Nd, Nl, No: \p{N}), as the Digits pre-tokenizer's pattern does.
func numericMatcher(s string, from int) (int, int, bool) {
	for i := from; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unicode.IsNumber(r) {
			return i, i + n, true
		}
		i += n
	}
	return 0, 0, false
}
