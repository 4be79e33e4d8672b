// Package quote bounds what an error message quotes of what a client
// sent. An error that quotes its input whole grows with it: a lease ask
// whose generator name was 60 MiB of control bytes was answered with 210
// MiB (each byte quoted as \x01), and the message, the answer and its
// encoding took a node past its --memory-limit. Every message that
// quotes a name, a key, a path or a parameter's name or value a request
// carried quotes it through Input, so that what it costs is bounded
// whatever was sent; an error of code outside the project that quotes
// its input whole is bounded by Error; the faces bound the whole message
// they answer with besides (internal/server/httperr.Message), for a quote
// that forgets.
//
// Standard library only; no package-level mutable state.
package quote

import (
	"strconv"
	"unicode/utf8"
)

// MaxBytes is how many bytes of its input Input quotes: every name a
// request may give whole (a job's, a generator's: 128 bytes) and enough
// of any other to tell which it was.
const MaxBytes = 128

// Input is s quoted as %q quotes it, if s is at most MaxBytes; else its
// first MaxBytes (cut at the start of a character) quoted, followed by
// how many bytes s has in all:
//
//	"nnnnnnnn"… (62914560 bytes; the first 128 quoted)
//
// Its length is at most about 4 × MaxBytes however long s is.
func Input(s string) string {
	if len(s) <= MaxBytes {
		return strconv.Quote(s)
	}
	n := MaxBytes
	for n > MaxBytes-utf8.UTFMax && !utf8.RuneStart(s[n]) {
		n-- // a character cut in two would be quoted as bytes
	}
	return strconv.Quote(s[:n]) + "… (" + strconv.Itoa(len(s)) + " bytes; the first " + strconv.Itoa(n) + " quoted)"
}

// MaxErrorBytes bounds the message of an error Error wraps.
const MaxErrorBytes = 4 * MaxBytes

// Error is err with its message bounded to MaxErrorBytes, for an error
// made by code outside the project that quotes its input whole — a JSON
// decoder naming a member it does not know, or one given twice, quotes
// the member's name, as long as the body — while errors.Is and errors.As
// still find what err wraps. Nil is nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return bounded{err}
}

type bounded struct{ err error }

func (b bounded) Unwrap() error { return b.err }

func (b bounded) Error() string {
	msg := b.err.Error()
	if len(msg) <= MaxErrorBytes {
		return msg
	}
	n := MaxErrorBytes
	for n > MaxErrorBytes-utf8.UTFMax && !utf8.RuneStart(msg[n]) {
		n--
	}
	return msg[:n] + "… (" + strconv.Itoa(len(msg)) + " bytes; the first " + strconv.Itoa(n) + " told)"
}
