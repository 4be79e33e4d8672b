package tokenize

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizer regexes byte-level models and tiktoken's encodings
// ship, matched by hand.
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
	// o200kPattern is tiktoken's o200k_base's: cl100k_base's with words
	// cut where lower case turns upper, marks kept in words, and a
	// contraction kept with its word.
	o200kPattern = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// knownPatterns are the patterns matched by hand, by their text.
var knownPatterns = map[string]matcher{
	gpt2Pattern:   everywhere(matchGPT2),
	llama3Pattern: everywhere(func(s string, i int) int { return matchCL100K(s, i, 3) }),
	qwen2Pattern:  everywhere(func(s string, i int) int { return matchCL100K(s, i, 1) }),
	o200kPattern:  everywhere(matchO200K),
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

// o200kPattern's classes: its words are runs of upper-case letters
// ([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]) then lower-case ones
// ([\p{Ll}\p{Lm}\p{Lo}\p{M}]), so a letter's category matters, and a
// mark is in both runs and may also lead a word as [^\r\n\p{L}\p{N}].
const (
	o2Other  = iota // [^\s\p{L}\p{N}\p{M}]
	o2Upper         // Lu, Lt
	o2Lower         // Ll
	o2Either        // Lm, Lo
	o2Mark          // M
	o2Number        // N
	o2Space         // \s
)

var o2ASCII = func() (t [128]uint8) {
	for c := range 128 {
		t[c] = o2ClassOf(rune(c))
	}
	return t
}()

func o2ClassOf(r rune) uint8 {
	switch {
	case unicode.IsLetter(r):
		switch {
		case unicode.Is(unicode.Lu, r) || unicode.Is(unicode.Lt, r):
			return o2Upper
		case unicode.Is(unicode.Ll, r):
			return o2Lower
		}
		return o2Either
	case unicode.Is(unicode.M, r):
		return o2Mark
	case unicode.IsNumber(r):
		return o2Number
	case unicode.IsSpace(r):
		return o2Space
	}
	return o2Other
}

func o2ClassAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return o2ASCII[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return o2ClassOf(r), n
}

func o2IsUpper(c uint8) bool { return c == o2Upper || c == o2Either || c == o2Mark }
func o2IsLower(c uint8) bool { return c == o2Lower || c == o2Either || c == o2Mark }

// o2Run returns the end of the run at i of characters in the class set.
func o2Run(s string, i int, in func(uint8) bool) int {
	for i < len(s) {
		c, n := o2ClassAt(s, i)
		if !in(c) {
			break
		}
		i += n
	}
	return i
}

// o2UpperLower is U*L+ at p, U and L the upper- and lower-case sets
// (they share Lm, Lo and M), as a backtracking engine matches it: U*
// takes its run, and where no L follows it gives back characters until
// one of them is an L (which ends the match, the next being no L); -1
// for no match.
func o2UpperLower(s string, p int) int {
	q, lastL := p, -1
	for q < len(s) {
		c, n := o2ClassAt(s, q)
		if !o2IsUpper(c) {
			break
		}
		if o2IsLower(c) {
			lastL = q + n
		}
		q += n
	}
	if q < len(s) {
		if c, _ := o2ClassAt(s, q); o2IsLower(c) {
			return o2Run(s, q, o2IsLower)
		}
	}
	return lastL
}

// o2UpperThenLower is U+L* at p, or -1.
func o2UpperThenLower(s string, p int) int {
	q := o2Run(s, p, o2IsUpper)
	if q == p {
		return -1
	}
	return o2Run(s, q, o2IsLower)
}

// matchO200K is o200kPattern at i: its seven alternatives in order, the
// optional leading [^\r\n\p{L}\p{N}] of the first two tried with, then
// without, and the contraction after a word taken where it follows.
func matchO200K(s string, i int) int {
	c0, n0 := o2ClassAt(s, i)
	lead := c0 != o2Upper && c0 != o2Lower && c0 != o2Either && c0 != o2Number && s[i] != '\r' && s[i] != '\n'
	word := func(at func(string, int) int) int {
		e := -1
		if lead && i+n0 < len(s) {
			e = at(s, i+n0)
		}
		if e < 0 {
			e = at(s, i)
		}
		if e >= 0 && e < len(s) && s[e] == '\'' {
			e += contraction(s, e, true)
		}
		return e
	}
	if e := word(o2UpperLower); e >= 0 {
		return e
	}
	if e := word(o2UpperThenLower); e >= 0 {
		return e
	}
	// \p{N}{1,3}
	if c0 == o2Number {
		j := i
		for k := 0; k < 3 && j < len(s); k++ {
			c, n := o2ClassAt(s, j)
			if c != o2Number {
				break
			}
			j += n
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		j = i + 1
	}
	if c, _ := o2ClassAt(s, j); c == o2Other || c == o2Mark {
		k := o2Run(s, j, func(c uint8) bool { return c == o2Other || c == o2Mark })
		for k < len(s) && (s[k] == '\r' || s[k] == '\n' || s[k] == '/') {
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
