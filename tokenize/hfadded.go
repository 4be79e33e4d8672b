package tokenize

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// addedSet is one of the reference's two matchers of added tokens
// (AddedVocabulary: the tokens matched on the raw text, and those
// matched on the normalized text): leftmost-longest matching of their
// contents, then each match widened or dropped by its token's options,
// as find_matches does.
type addedSet struct {
	trie   *byteTrie
	first  [256]bool // bytes a token starts with
	tokens []addedToken
}

type addedToken struct {
	id                         int32
	singleWord, lstrip, rstrip bool
}

// newAddedSet builds the matcher of keys (tokens[i] is keys[i]'s).
// Duplicate keys are refused, as the reference's Aho-Corasick builder
// refuses them.
func newAddedSet(keys []string, tokens []addedToken) (*addedSet, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	seen := make(map[string]bool, len(keys))
	ids := make([]int32, len(keys))
	a := &addedSet{tokens: tokens}
	for i, k := range keys {
		if seen[k] {
			return nil, fmt.Errorf("%w: tokenizer.json: two added tokens match as %q", ErrNotModel, k)
		}
		seen[k] = true
		ids[i] = int32(i)
		a.first[k[0]] = true
	}
	a.trie = newByteTrie(keys, ids)
	return a, nil
}

// split cuts s into the text between added tokens (yield(piece, -1))
// and the tokens (yield("", id)), in order.
func (a *addedSet) split(s string, yield func(piece string, id int32)) {
	if a == nil || s == "" {
		if s != "" {
			yield(s, -1)
		}
		return
	}
	b := []byte(s)
	from := 0 // start_offset: the end of the last match kept
	for i := 0; i < len(s); {
		if !a.first[s[i]] {
			i++
			continue
		}
		l, k := a.trie.longestPrefix(b[i:])
		if l == 0 {
			i++
			continue
		}
		start, stop := i, i+l
		i = stop // the next match starts after this one, kept or not
		t := a.tokens[k]
		if t.singleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if t.lstrip {
			start = max(leadingSpaceOfEnd(s[:start]), from)
		}
		if t.rstrip {
			stop += spaceAtStart(s[stop:])
		}
		if from < start {
			yield(s[from:start], -1)
		}
		yield("", t.id)
		from = stop
	}
	if from < len(s) {
		yield(s[from:], -1)
	}
}

// isWordChar is the Rust regex crate's \w: Alphabetic, M, Nd, Pc,
// Join_Control.
func isWordChar(r rune) bool {
	return unicode.In(r, unicode.Other_Alphabetic, unicode.L, unicode.Nl, unicode.M, unicode.Nd, unicode.Pc, unicode.Join_Control)
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return isWordChar(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordChar(r)
}

// leadingSpaceOfEnd is where the whitespace that ends s starts (\s*$).
func leadingSpaceOfEnd(s string) int {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) {
			break
		}
		i -= n
	}
	return i
}

// spaceAtStart is the length of the whitespace s starts with (^\s*).
func spaceAtStart(s string) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	return i
}

// buildAddedTokens gives each added token its ID as the reference's
// add_tokens does (the vocabulary's ID of its content, else the next
// after the vocabulary, in order; a content seen before keeps its ID
// and takes the later entry's options) and builds the two matchers.
func buildAddedTokens(added []hfAddedToken, vocab map[string]int32, forms []norm.Form) (raw, normed *addedSet, maxID int32, err error) {
	nextID := int32(len(vocab))
	byContent := map[string]int32{}
	var order []int32
	byID := map[int32]hfAddedToken{}
	maxID = -1
	for _, t := range added {
		if t.Content == "" {
			continue
		}
		id, ok := byContent[t.Content]
		if !ok {
			if id, ok = vocab[t.Content]; !ok {
				id = nextID
				nextID++
			}
			byContent[t.Content] = id
		}
		if _, ok := byID[id]; !ok {
			order = append(order, id)
		}
		byID[id] = t
		maxID = max(maxID, id)
	}
	var rawKeys, normKeys []string
	var rawTokens, normTokens []addedToken
	for _, id := range order {
		t := byID[id]
		at := addedToken{id: id, singleWord: t.SingleWord, lstrip: t.LStrip, rstrip: t.RStrip}
		if t.Normalized {
			normKeys = append(normKeys, normalize(forms, t.Content))
			normTokens = append(normTokens, at)
		} else {
			rawKeys = append(rawKeys, t.Content)
			rawTokens = append(rawTokens, at)
		}
	}
	if raw, err = newAddedSet(rawKeys, rawTokens); err != nil {
		return nil, nil, 0, err
	}
	if normed, err = newAddedSet(normKeys, normTokens); err != nil {
		return nil, nil, 0, err
	}
	return raw, normed, maxID, nil
}

// appendValidUTF8 appends s to dst with each maximal subpart of an
// ill-formed sequence replaced by U+FFFD: the Unicode Standard's
// recommended practice (§3.9, "U+FFFD Substitution of Maximal
// Subparts"), which Python's bytes.decode(errors="replace"), Rust's
// String::from_utf8_lossy and the WHATWG decoder (JavaScript's
// TextDecoder) all follow. Go's own (a range loop, strings.ToValidUTF8)
// does not: it replaces each byte, or each run.
func appendValidUTF8(dst []byte, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		if _, n := utf8.DecodeRune(s[i:]); n > 1 {
			dst = append(dst, s[i:i+n]...)
			i += n
			continue
		}
		dst = append(dst, "\uFFFD"...)
		i += maximalSubpart(s[i:])
	}
	return dst
}

// maximalSubpart returns the length of the longest prefix of s (which
// does not start a well-formed sequence) that starts one: at least 1.
func maximalSubpart(s []byte) int {
	c := s[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF) // the second byte's range
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 1; k <= need && k < len(s); k++ {
		b := s[k]
		if k == 1 && (b < lo || b > hi) || k > 1 && (b < 0x80 || b > 0xBF) {
			break
		}
		n++
	}
	return n
}
