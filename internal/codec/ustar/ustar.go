// Package ustar writes and reads the plain header block of a regular
// file in a tar archive: the one tar codec of the module, through which
// every tar Brand writes is written. Through archive/tar a member's
// header cost the resident writer an allocation and a quarter of a
// decode's CPU, and Reader.Next is half of what decoding a batch of
// 10 KiB samples costs: it fills a whole Header (times, names, a format
// guess that scans every byte of the block rune by rune) for the two
// fields Brand uses.
//
// Both halves are held to archive/tar, and leave it everything else:
//
//   - the writer fills a Template — archive/tar's header of an empty
//     regular file, made once — with a member's name, size and checksum,
//     which is archive/tar's header of that member byte for byte
//     (TestPutIsArchiveTars) for any member that Fits;
//   - a Writer writes a batch's item, member after member, into a buffer
//     sized for it: each header its template's, a name over 100 bytes
//     split into ustar's prefix and name as archive/tar splits it
//     (TestWriterIsArchiveTars);
//   - any other header — a name ustar cannot hold (PAX), an owner, a
//     dataset's own header kept field for field — is archive/tar's
//     (AppendHeader, AppendTarHeader): ustar does not re-implement PAX
//     records or GNU's formats, it is the one door to them;
//   - the reader (Plain) reads a block only when archive/tar would return
//     it as is from Reader.Next — a regular file in ustar or GNU format,
//     every numeric field octal, a local name — and declines every other,
//     valid or not, which the caller then leaves to archive/tar
//     (FuzzPlain). It does not re-implement PAX records, GNU long names
//     or sparse files.
package ustar

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"path/filepath"
	"time"

	"github.com/brandgw/brand/internal/errkind"
)

// BlockSize is the tar block size: headers are one block, and every
// member's data is padded to a multiple of it.
const BlockSize = 512

// MaxSize is the size of the largest member a ustar header holds: eleven
// octal digits.
const MaxSize = 1<<33 - 1

// The fields of a header block, as [start, end) offsets (POSIX.1-1988
// ustar, and GNU tar's variant of it).
const (
	offName, endName         = 0, 100
	offMode, endMode         = 100, 108
	offUID, endUID           = 108, 116
	offGID, endGID           = 116, 124
	offSize, endSize         = 124, 136
	offMtime, endMtime       = 136, 148
	offChksum, endChksum     = 148, 156
	offTypeflag              = 156
	offMagic, endMagic       = 257, 263
	offVersion, endVersion   = 263, 265
	offDevMajor, endDevMinor = 329, 345 // the device numbers, major then minor
	offPrefix, endPrefix     = 345, 500 // ustar; GNU tar keeps atime and ctime here
	offAtimeGNU, offCtimeGNU = 345, 357
	offTrailer, endTrailer   = 508, 512 // "tar\x00" marks star's format
)

// ErrTime is a modification time a ustar header cannot hold (before
// 1970, or past 8^11 seconds after).
var ErrTime = errkind.New(errkind.Internal, "ustar: a modification time the header cannot hold")

// A Template is the header block of a regular file with every field
// fixed but its name, size and checksum: what Put copies and fills in.
type Template [BlockSize]byte

// NewTemplate is archive/tar's ustar header of a regular file of mode
// mode modified at mtime, with no owner, an empty name and size 0, its
// checksum field zeroed.
func NewTemplate(mode int64, mtime time.Time) (*Template, error) {
	var t Template
	w := blockWriter{buf: t[:]}
	if err := tar.NewWriter(&w).WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Mode: mode, ModTime: mtime, Format: tar.FormatUSTAR}); err != nil || w.n != BlockSize {
		return nil, ErrTime
	}
	clear(t[offChksum:endChksum])
	return &t, nil
}

// WithoutDevice is t with its device numbers empty (NULs) rather than
// archive/tar's "0000000": the pack stage's headers have always left
// them so, and archive/tar reads both as 0.
func (t *Template) WithoutDevice() *Template {
	u := *t
	clear(u[offDevMajor:endDevMinor])
	return &u
}

// Fits reports whether Put writes the header of a member of size bytes
// named name (its parts, concatenated): a name of at most 100 ASCII
// bytes without a NUL, and a size of at most MaxSize. Any other member
// needs archive/tar (a PAX header for a long name; an error for a name
// of other bytes, as archive/tar refuses it in ustar).
func Fits(size int64, name ...string) bool {
	if size < 0 || size > MaxSize {
		return false
	}
	n := 0
	for _, s := range name {
		n += len(s)
		for i := range len(s) {
			if c := s[i]; c == 0 || c >= 0x80 {
				return false
			}
		}
	}
	return n <= endName
}

// Put writes into blk (BlockSize bytes) the header of a regular file
// named name (its parts, concatenated: a key, ".", an extension without
// building the string) of size bytes. The member must Fit.
func (t *Template) Put(blk []byte, size int64, name ...string) { t.put(blk, size, "", name) }

// put is Put with ustar's prefix field set: the name's head, where the
// name is split.
func (t *Template) put(blk []byte, size int64, prefix string, name []string) {
	blk = blk[:BlockSize]
	copy(blk, t[:])
	k := 0
	for _, s := range name {
		k += copy(blk[k:endName], s)
	}
	copy(blk[offPrefix:endPrefix], prefix)
	octal(blk[offSize:endSize-1], size) // eleven digits and the template's NUL
	sum, _ := checksums((*[BlockSize]byte)(blk))
	octal(blk[offChksum:offChksum+6], sum)
	blk[endChksum-2], blk[endChksum-1] = 0, ' '
}

// octal writes x in octal into b, zero-padded to its length.
func octal(b []byte, x int64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + x&7)
		x >>= 3
	}
}

// Plain reads a header block that archive/tar would return as is from
// Reader.Next: a regular file ('0'), in ustar or GNU format, every
// numeric field octal, and a name that is local (filepath.IsLocal). It
// returns the member's name and size exactly as archive/tar would, or
// ok=false for any other block, valid or not, which the caller then
// leaves to archive/tar.
func Plain(blk *[BlockSize]byte) (name string, size int64, ok bool) {
	if blk[offTypeflag] != '0' {
		return "", 0, false
	}
	sum, ok := parseOctal(blk[offChksum:endChksum])
	if !ok {
		return "", 0, false
	}
	if unsigned, signed := checksums(blk); int64(sum) != unsigned && int64(sum) != signed {
		return "", 0, false
	}
	magic := string(blk[offMagic:endMagic])
	var prefix []byte
	switch {
	case magic == "ustar\x00" && string(blk[offTrailer:endTrailer]) != "tar\x00":
		prefix = cString(blk[offPrefix:endPrefix])
	case magic == "ustar " && string(blk[offVersion:endVersion]) == " \x00":
		// GNU: archive/tar parses the access and change times only when
		// their first byte is set, and may then read the field as a
		// prefix; leave that to it.
		if blk[offAtimeGNU] != 0 || blk[offCtimeGNU] != 0 {
			return "", 0, false
		}
	default:
		return "", 0, false // V7, star, or no tar header at all
	}
	// archive/tar rejects a header if any numeric field fails to parse.
	for _, f := range [...][2]int{
		{offMode, endMode}, {offUID, endUID}, {offGID, endGID}, {offMtime, endMtime},
		{offDevMajor, offDevMajor + 8}, {offDevMajor + 8, endDevMinor},
	} {
		if _, ok := parseOctal(blk[f[0]:f[1]]); !ok {
			return "", 0, false
		}
	}
	n, ok := parseOctal(blk[offSize:endSize])
	if !ok || n >= 1<<63 {
		return "", 0, false
	}
	base := cString(blk[offName:endName])
	if len(prefix) > 0 {
		name = string(prefix) + "/" + string(base)
	} else {
		name = string(base)
	}
	// Reader.Next reports a non-local name as an error under
	// GODEBUG=tarinsecurepath=0; archive/tar decides.
	if !filepath.IsLocal(name) {
		return "", 0, false
	}
	return name, int64(n), true
}

// parseOctal parses a numeric header field as archive/tar's parser does
// for octal: surrounding spaces and NULs trimmed, the rest cut at its
// first NUL, then strictly octal digits with no overflow. A base-256
// field (high bit set) is not octal, and fails.
func parseOctal(b []byte) (uint64, bool) {
	b = cString(bytes.Trim(b, " \x00"))
	var x uint64
	for _, c := range b {
		if c < '0' || c > '7' || x>>61 != 0 {
			return 0, false
		}
		x = x<<3 | uint64(c-'0')
	}
	return x, true
}

// checksums sums the block's bytes as unsigned and as signed values, with
// the checksum field counted as spaces; a header's checksum may be either
// (archive/tar writes the unsigned one). It adds eight bytes at a time: a
// byte-wise loop was most of Plain's cost.
func checksums(blk *[BlockSize]byte) (unsigned, signed int64) {
	const (
		lanes = 0x00ff00ff00ff00ff // every other byte, in 16-bit lanes
		highs = 0x8080808080808080 // every byte's top bit
	)
	var acc uint64 // four 16-bit lanes: at most 64 words × 2 bytes × 255 each
	high := 0      // bytes >= 0x80, which count 256 less when signed
	for i := 0; i < BlockSize; i += 8 {
		w := binary.LittleEndian.Uint64(blk[i:])
		acc += w&lanes + w>>8&lanes
		high += bits.OnesCount64(w & highs)
	}
	sum := int64(acc&0xffff + acc>>16&0xffff + acc>>32&0xffff + acc>>48)
	// Count the checksum field as eight spaces instead of its own bytes.
	for _, c := range blk[offChksum:endChksum] {
		sum -= int64(c)
		if c >= 0x80 {
			high--
		}
	}
	sum += 8 * ' '
	return sum, sum - 256*int64(high)
}

// cString is b up to its first NUL.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// IsZero reports whether blk is all zeros, as the two blocks that end an
// archive are.
func IsZero(blk []byte) bool {
	for _, c := range blk {
		if c != 0 {
			return false
		}
	}
	return true
}

// blockWriter is an io.Writer into a fixed buffer, for archive/tar's
// header.
type blockWriter struct {
	buf []byte
	n   int
}

func (w *blockWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.buf)-w.n {
		return 0, errors.New("ustar: header past its block")
	}
	copy(w.buf[w.n:], p)
	w.n += len(p)
	return len(p), nil
}
