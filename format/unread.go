package format

import (
	"errors"
	"fmt"
	"strings"

	"github.com/brandgw/brand/internal/codec/ustar"
)

// Samples left unread. A sample holding a value past a bound its reader
// sets (a text of more than the gateway's --max-text-bytes, found from
// its length before the value is read: TextBound) is not decoded: its
// members are written as one, UnreadExt, saying which field holds how
// many bytes and the bound. The reader of samples (internal/batch/reader)
// finds it wherever the chunk came from and refuses the read naming it
// (422), or leaves it out in skip mode, as a sample written damaged at
// rest (damage.go) is: never its bytes, never an empty value in their
// place.

// UnreadExt is the extension of the one member of a sample written
// unread; its data is unreadMagic and why.
const UnreadExt = "unread"

// unreadMagic begins an unread sample's member: a field of a dataset
// that happens to be called "unread" is not taken for one.
const unreadMagic = "BRAND-LEFT-UNREAD\n"

// WriteUnread writes the current sample of w (after Begin(key)) as
// unread: whatever members it has so far are dropped, and one member,
// UnreadExt, says why. The sample's room in the chunk's bound is at
// least a member's header and a block, which the message is cut to.
func WriteUnread(w *Writer, key, why string) error {
	if err := w.dropMembers(); err != nil {
		return err
	}
	msg := unreadMagic + why
	if len(msg) > Block {
		msg = msg[:Block]
	}
	if !ustar.Fits(int64(len(msg)), key, ".", UnreadExt) {
		return fmt.Errorf("%w: sample %s is left unread (%s), and its name does not fit a plain header to say so", ErrDamaged, key, why)
	}
	return w.Add(UnreadExt, []byte(msg))
}

// SampleUnread reports whether sample, a resident sample's bytes, was
// written unread (WriteUnread), and why. It reads the first header's
// name field alone for any other sample.
func SampleUnread(sample []byte) (why string, unread bool) {
	return marked(sample, UnreadExt, unreadMagic)
}

// marked reports whether sample's one member is of extension ext and
// begins with magic, and the rest of its data.
func marked(sample []byte, ext, magic string) (string, bool) {
	if len(sample) < Block {
		return "", false
	}
	name := sample[:100]
	if i := strings.IndexByte(string(name), 0); i >= 0 {
		name = name[:i]
	}
	if !strings.HasSuffix(string(name), "."+ext) {
		return "", false
	}
	full, n, ok := ustar.Plain((*[Block]byte)(sample[:Block]))
	if !ok || !strings.HasSuffix(full, "."+ext) || int64(len(sample)) < Block+n {
		return "", false
	}
	data := string(sample[Block : Block+n])
	if !strings.HasPrefix(data, magic) {
		return "", false
	}
	return data[len(magic):], true
}

// dropMembers drops the members of the current sample written so far:
// a decode that reads a sample's fields in turn learns only after some
// of them that it is to be written otherwise (WriteUnread).
func (w *Writer) dropMembers() error {
	switch {
	case w.err != nil:
		return w.err
	case !w.open:
		return w.fail(errors.New("format: a sample's members dropped before Begin"))
	case w.watch != nil:
		// Values placed ahead of the writer may lie in what is dropped.
		return w.fail(errors.New("format: a sample's members dropped in a decode that places values ahead"))
	}
	if !w.counting {
		w.n = w.start
	}
	w.known, w.lastOff = w.known[:0], -1
	return nil
}
