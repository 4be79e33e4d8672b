package ustar

import (
	"archive/tar"
	"fmt"
	"strings"
	"time"

	"github.com/brandgw/brand/internal/errkind"
)

// errMember is a member a Writer does not write: a header ustar cannot
// hold, or bytes past the writer's buffer. Either is the caller's sizing
// or naming gone wrong, never the data's.
var errMember = errkind.New(errkind.Internal, "ustar: a member the writer cannot hold")

// A Writer writes members one after another into a buffer sized for
// them: a batch's item, whose bytes are known before any is written.
// Each header is its template's, filled in as Put fills it; a name over
// 100 bytes is split into ustar's prefix and name as archive/tar splits
// it, so that every header is archive/tar's in ustar (tar.FormatUSTAR)
// byte for byte (TestWriterIsArchiveTars). Nothing is allocated for a
// name that Fits. Not safe for concurrent use.
type Writer struct {
	t   *Template
	buf []byte
	n   int
}

// NewWriter returns a Writer of members into buf, each header from t.
func NewWriter(buf []byte, t *Template) *Writer { return &Writer{t: t, buf: buf} }

// Member writes the header of a regular file of size bytes named name
// (its parts, concatenated) and the zeros that pad its data to a block,
// and returns the room for its data, which the caller fills. A member
// ustar does not hold — a name not of ASCII bytes, or ending in '/', or
// over 100 bytes without a '/' to split it at; a size past MaxSize —
// fails as archive/tar refuses it in ustar, and so does one past the
// buffer; nothing is written then.
func (w *Writer) Member(size int, name ...string) ([]byte, error) {
	end := w.n + BlockSize + int(Padded(int64(size)))
	if size < 0 || end > len(w.buf) {
		return nil, fmt.Errorf("%w: a member of %d bytes at %d of a buffer of %d", errMember, size, w.n, len(w.buf))
	}
	if err := w.t.header(w.buf[w.n:w.n+BlockSize], int64(size), name); err != nil {
		return nil, err
	}
	data := w.buf[w.n+BlockSize : w.n+BlockSize+size : w.n+BlockSize+size]
	clear(w.buf[w.n+BlockSize+size : end])
	w.n = end
	return data, nil
}

// Len is the bytes written so far.
func (w *Writer) Len() int { return w.n }

// Reset starts the writer again at its buffer's first byte, dropping
// what it wrote: a member list written anew in the same room.
func (w *Writer) Reset() { w.n = 0 }

// Padded is n bytes of a member's data padded to a block.
func Padded(n int64) int64 { return (n + BlockSize - 1) / BlockSize * BlockSize }

// header writes into blk the header of a regular file of size bytes named
// name's parts, t's fields, as archive/tar writes it in ustar: Put where
// the member Fits, else with the name split (split), or an error where
// archive/tar refuses it.
func (t *Template) header(blk []byte, size int64, name []string) error {
	if Fits(size, name...) && !endsInSlash(name) {
		t.Put(blk, size, name...)
		return nil
	}
	full := strings.Join(name, "")
	if size > MaxSize || strings.HasSuffix(full, "/") {
		return fmt.Errorf("%w: %q of %d bytes in ustar", errMember, full, size)
	}
	prefix, base, ok := split(full)
	if !ok {
		return fmt.Errorf("%w: %q in ustar (a name of other bytes than ASCII, or over 100 bytes with no '/' to split it at)", errMember, full)
	}
	t.put(blk, size, prefix, []string{base})
	return nil
}

// endsInSlash reports whether name's parts, concatenated, end in '/': a
// directory's name, which archive/tar refuses for a regular file.
func endsInSlash(name []string) bool {
	for i := len(name) - 1; i >= 0; i-- {
		if s := name[i]; s != "" {
			return s[len(s)-1] == '/'
		}
	}
	return false
}

// split is archive/tar's split of a name over 100 bytes into ustar's
// prefix (155 bytes) and name (100) fields (splitUSTARPath): at the last
// '/' within the prefix's reach that leaves 1 to 100 bytes after it, for
// a name of ASCII bytes only.
func split(name string) (prefix, base string, ok bool) {
	const prefixLen = endPrefix - offPrefix
	length := len(name)
	if length <= endName || !ascii(name) {
		return "", "", false
	} else if length > prefixLen+1 {
		length = prefixLen + 1
	} else if name[length-1] == '/' {
		length--
	}
	i := strings.LastIndexByte(name[:length], '/')
	nlen := len(name) - i - 1
	if i <= 0 || nlen > endName || nlen == 0 || i > prefixLen {
		return "", "", false
	}
	return name[:i], name[i+1:], true
}

// ascii reports whether s is of ASCII bytes without a NUL, as
// archive/tar's isASCII does.
func ascii(s string) bool {
	for i := range len(s) {
		if c := s[i]; c == 0 || c >= 0x80 {
			return false
		}
	}
	return true
}

// A Header is a regular file's header as Brand writes its own members
// where no Template holds them: archive/tar's tar.Header with Typeflag
// tar.TypeReg, these fields, and no owner.
type Header struct {
	Name    string
	Size    int64
	Mode    int64
	ModTime time.Time
	// Format is what the header may be written in: USTAR, PAX or Any.
	Format tar.Format
}

// The formats a Header may be asked in, archive/tar's names for what
// each allows where ustar does not hold the member.
const (
	// USTAR: a name over 100 bytes split into prefix and name; a member
	// ustar does not hold otherwise is refused.
	USTAR = tar.FormatUSTAR
	// PAX: USTAR where it holds the member, else a PAX header first (a
	// long or non-ASCII name, a size or time past ustar's fields).
	PAX = tar.FormatPAX
	// Any: archive/tar's choice, USTAR, else PAX, else GNU, the time
	// rounded to the second.
	Any = tar.FormatUnknown
)

// AppendHeader appends h's header blocks to dst as archive/tar's
// Writer.WriteHeader writes them, or fails as it refuses them (dst
// returned as it was). For a member a Template holds, Put writes the
// same block without archive/tar's cost.
func AppendHeader(dst []byte, h Header) ([]byte, error) {
	return AppendTarHeader(dst, &tar.Header{Typeflag: tar.TypeReg, Name: h.Name, Size: h.Size, Mode: h.Mode, ModTime: h.ModTime, Format: h.Format})
}

// AppendTarHeader appends to dst the header blocks archive/tar's
// Writer.WriteHeader writes for h, every field of it: for a header kept
// as a dataset wrote it (its owner, its format, its PAX records). The
// data and its padding are the caller's.
func AppendTarHeader(dst []byte, h *tar.Header) ([]byte, error) {
	a := appender{b: dst}
	if err := tar.NewWriter(&a).WriteHeader(h); err != nil {
		return dst, err
	}
	return a.b, nil
}

// appender is an io.Writer that appends to a slice, for archive/tar's
// header blocks.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}
