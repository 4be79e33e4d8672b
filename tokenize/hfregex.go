package tokenize

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizer regexes byte-level models ship, matched by hand.
//
// The reference compiles them with Oniguruma, a backtracking engine:
// alternatives are tried in order and the first that matches wins, and
// they use a lookahead (\s+(?!\S)) that Go's regexp lacks. Each function
// below is one pattern's alternation written out, the backtracking of
// its quantifiers included, so it returns the match Oniguruma returns at
// a position. Every character starts a match of these patterns (the
// last alternatives take any run of whitespace, of letters, of numbers
// or of anything else), so a split never has a gap. Character classes
// are Unicode's, as Oniguruma's are: \p{L} letters, \p{N} numbers (Nd,
// Nl, No), \s White_Space (Go's unicode.IsSpace is the same set).
//
// A pattern not among these is matched by github.com/dlclark/regexp2
// (hfpretok.go, compileFallback): a backtracking engine with .NET's
// syntax, whose classes and alternation agree with Oniguruma's on the
// patterns models ship (TestHFReference holds DeepSeek V3's three to the
// reference), but which searches a rune slice with an allocation a call:
// the known patterns are matched by hand to keep the byte-level path as
// fast as the SentencePiece one.
const (
	// gpt2Pattern is ByteLevel's own (use_regex), and GPT-2's, GPT-J's,
	// GPT-NeoX's, Pythia's and OLMo's.
	gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// llama3Pattern is Llama 3's (tiktoken's cl100k_base).
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// qwen2Pattern is Qwen 2's and 3's: Llama 3's with one digit a match.
	qwen2Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// knownPatterns are the patterns matched by hand, by their text.
var knownPatterns = map[string]matcher{
	gpt2Pattern:   everywhere(matchGPT2),
	llama3Pattern: everywhere(func(s string, i int) int { return matchCL100K(s, i, 3) }),
	qwen2Pattern:  everywhere(func(s string, i int) int { return matchCL100K(s, i, 1) }),
}

// everywhere makes a matcher of a pattern that matches at every
// position: at returns the end of the match at i.
func everywhere(at func(s string, i int) int) matcher {
	return func(s string, from int) (int, int, bool) {
		if from >= len(s) {
			return 0, 0, false
		}
		return from, at(s, from), true
	}
}

// Character classes, with an ASCII table for speed.
const (
	clsOther = iota // [^\s\p{L}\p{N}]
	clsLetter
	clsNumber
	clsSpace
)

var asciiClass = func() (t [128]uint8) {
	for c := range 128 {
		r := rune(c)
		switch {
		case unicode.IsLetter(r):
			t[c] = clsLetter
		case unicode.IsNumber(r):
			t[c] = clsNumber
		case unicode.IsSpace(r):
			t[c] = clsSpace
		}
	}
	return t
}()

// classAt returns the class of the character at i and its length.
func classAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	switch {
	case unicode.IsLetter(r):
		return clsLetter, n
	case unicode.IsNumber(r):
		return clsNumber, n
	case unicode.IsSpace(r):
		return clsSpace, n
	}
	return clsOther, n
}

// runOf returns the end of the run of class cls that starts at i.
func runOf(s string, i int, cls uint8) int {
	for i < len(s) {
		c, n := classAt(s, i)
		if c != cls {
			break
		}
		i += n
	}
	return i
}

// contraction returns the length of 's 't 're 've 'm 'll 'd at i (s[i]
// is an apostrophe), or 0. Case-insensitively, ſ (U+017F) is an s, as
// Unicode's case folding has it.
func contraction(s string, i int, fold bool) int {
	if i+1 >= len(s) {
		return 0
	}
	c := s[i+1]
	if fold && c >= 'A' && c <= 'Z' {
		c += 'a' - 'A'
	}
	switch c {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v', 'l':
		if i+2 >= len(s) {
			return 0
		}
		d := s[i+2]
		if fold && d >= 'A' && d <= 'Z' {
			d += 'a' - 'A'
		}
		if (c == 'r' || c == 'v') && d == 'e' || c == 'l' && d == 'l' {
			return 3
		}
	}
	if fold && len(s) >= i+3 && s[i+1:i+3] == "ſ" {
		return 3
	}
	return 0
}

// whitespaceTail is the last two alternatives both patterns end with,
// \s+(?!\S)|\s+, at i, where a run of whitespace ends at e: all of it
// at the end of the text, else all but its last character (which goes
// with what follows), else (a run of one) that one.
func whitespaceTail(s string, i, e int) int {
	if e == len(s) {
		return e
	}
	_, last := utf8.DecodeLastRuneInString(s[i:e])
	if e-last > i {
		return e - last
	}
	return e
}

// matchGPT2 is gpt2Pattern at i.
func matchGPT2(s string, i int) int {
	if s[i] == '\'' {
		if n := contraction(s, i, false); n > 0 {
			return i + n
		}
	}
	// ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		j = i + 1
	}
	if c, _ := classAt(s, j); c != clsSpace {
		return runOf(s, j, c)
	}
	return whitespaceTail(s, i, runOf(s, i, clsSpace))
}

// matchCL100K is llama3Pattern at i (maxDigits 3), or qwen2Pattern
// (maxDigits 1).
func matchCL100K(s string, i, maxDigits int) int {
	c0, n0 := classAt(s, i)
	if s[i] == '\'' {
		if n := contraction(s, i, true); n > 0 {
			return i + n
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c0 == clsLetter {
		return runOf(s, i, clsLetter)
	}
	if c0 != clsNumber && s[i] != '\r' && s[i] != '\n' && i+n0 < len(s) {
		if c1, _ := classAt(s, i+n0); c1 == clsLetter {
			return runOf(s, i+n0, clsLetter)
		}
	}
	// \p{N}{1,maxDigits}
	if c0 == clsNumber {
		j := i
		for k := 0; k < maxDigits && j < len(s); k++ {
			c, n := classAt(s, j)
			if c != clsNumber {
				break
			}
			j += n
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		j = i + 1
	}
	if c, _ := classAt(s, j); c == clsOther {
		k := runOf(s, j, clsOther)
		for k < len(s) && (s[k] == '\r' || s[k] == '\n') {
			k++
		}
		return k
	}
	// Here s[i] is whitespace. \s*[\r\n]+: up to the run's last newline.
	e := runOf(s, i, clsSpace)
	for k := e - 1; k >= i; k-- {
		if s[k] == '\r' || s[k] == '\n' {
			return k + 1
		}
	}
	return whitespaceTail(s, i, e)
}
