package client

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"path/filepath"
)

// blockSize is the tar block size: headers are one block, and every
// member's data is padded to a multiple of it.
const blockSize = 512

// The fields of a tar header block that plainHeader reads, as [start, end)
// offsets (POSIX.1-1988 ustar, and GNU tar's variant of it).
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
	offDevMajor, endDevMajor = 329, 337
	offDevMinor, endDevMinor = 337, 345
	offPrefix, endPrefix     = 345, 500 // ustar; GNU tar keeps atime and ctime here
	offAtimeGNU, offCtimeGNU = 345, 357
	offTrailer, endTrailer   = 508, 512 // "tar\x00" marks star's format
)

// plainHeader reads a tar header block that archive/tar would return as is
// from Reader.Next: a regular file ('0'), in ustar or GNU format, every
// numeric field octal, and a name that is local (filepath.IsLocal). It
// returns the member's name and size exactly as archive/tar would, or
// ok=false for any other block, valid or not, which the caller then leaves
// to archive/tar.
//
// With 10 KiB samples archive/tar's Next is half of what decoding a batch
// costs: it fills a whole Header (times, names, a format guess that scans
// every byte of the block rune by rune) for the two fields Brand's decoder
// uses. Declining everything unusual keeps the two readers in agreement
// without re-implementing PAX records, GNU long names or sparse files;
// FuzzPlainHeader and FuzzDecodeTar hold them to it.
func plainHeader(blk *[blockSize]byte) (name string, size int64, ok bool) {
	if blk[offTypeflag] != '0' {
		return "", 0, false
	}
	sum, ok := octal(blk[offChksum:endChksum])
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
		{offDevMajor, endDevMajor}, {offDevMinor, endDevMinor},
	} {
		if _, ok := octal(blk[f[0]:f[1]]); !ok {
			return "", 0, false
		}
	}
	n, ok := octal(blk[offSize:endSize])
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

// octal parses a numeric header field as archive/tar's parser does for
// octal: surrounding spaces and NULs trimmed, the rest cut at its first
// NUL, then strictly octal digits with no overflow. A base-256 field (high
// bit set) is not octal, and fails.
func octal(b []byte) (uint64, bool) {
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
// the checksum field counted as spaces; a header's checksum may be either.
// It adds eight bytes at a time: a byte-wise loop was most of plainHeader's
// cost.
func checksums(blk *[blockSize]byte) (unsigned, signed int64) {
	const (
		lanes = 0x00ff00ff00ff00ff // every other byte, in 16-bit lanes
		highs = 0x8080808080808080 // every byte's top bit
	)
	var acc uint64 // four 16-bit lanes: at most 64 words × 2 bytes × 255 each
	high := 0      // bytes >= 0x80, which count 256 less when signed
	for i := 0; i < blockSize; i += 8 {
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

// isZero reports whether a block is all zeros, as the two blocks that end
// an archive are.
func isZero(blk []byte) bool {
	var zero [blockSize]byte
	return bytes.Equal(blk, zero[:])
}
