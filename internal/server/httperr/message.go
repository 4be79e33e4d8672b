package httperr

import (
	"strconv"
	"unicode/utf8"
)

// MaxMessage bounds the message an error answer tells, in bytes: more
// than the longest a refusal needs (a parameter's refusal naming every
// parameter known where it was sent is about 1 KiB), far less than a
// request may send.
const MaxMessage = 4 << 10

// Message is msg as a face's error answer tells it: whole if at most
// MaxMessage bytes, else its first MaxMessage and how many were left
// out. Every message quoting what a client sent quotes a bounded prefix
// of it (internal/quote), so this cuts none that is written as it
// should be; it is there for one that is not, so that no answer grows
// with what a request sent.
func Message(msg string) string {
	if len(msg) <= MaxMessage {
		return msg
	}
	n := MaxMessage
	for n > MaxMessage-utf8.UTFMax && !utf8.RuneStart(msg[n]) {
		n-- // not a character cut in two
	}
	return msg[:n] + "… (" + strconv.Itoa(len(msg)-n) + " more bytes left out)"
}
