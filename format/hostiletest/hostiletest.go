// Package hostiletest makes hostile inputs for the formats Brand serves in
// place, for tests and fuzz corpora: compressed data of every codec the
// formats read (ZSTD with and without a frame content size, gzip,
// Snappy, LZ4 blocks and frames, Brotli, bzip2) that inflates far past
// the size its file states — decompression bombs — or just past it, and
// Parquet files and MDS shards around them whose metadata states honest
// sizes. A test asks a decoder to refuse them within what the stated
// sizes allow. It is linked only into tests.
package hostiletest

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// The codecs, by the names the package's functions take.
const (
	ZSTD       = "zstd"        // Zstandard frames with a content size, as EncodeAll writes them
	ZSTDNoSize = "zstd-nosize" // Zstandard frames without one, as streaming writers write them
	Gzip       = "gzip"
	Snappy     = "snappy"    // a Snappy block (Parquet's SNAPPY)
	LZ4Raw     = "lz4raw"    // a bare LZ4 block (Parquet's LZ4_RAW)
	LZ4Frame   = "lz4frame"  // an LZ4 frame (what Parquet's deprecated LZ4 may hold)
	LZ4Hadoop  = "lz4hadoop" // Hadoop's LZ4 framing (Parquet's deprecated LZ4, as Arrow writes it)
	Brotli     = "brotli"
	BZ2        = "bz2"
)

// Codecs are every codec, in a fixed order.
var Codecs = []string{ZSTD, ZSTDNoSize, Gzip, Snappy, LZ4Raw, LZ4Frame, LZ4Hadoop, Brotli, BZ2}

// Compress returns data compressed with codec as its writers write it.
func Compress(codec string, data []byte) []byte {
	var b bytes.Buffer
	switch codec {
	case ZSTD:
		e, _ := zstd.NewWriter(nil)
		return e.EncodeAll(data, nil)
	case ZSTDNoSize:
		e, _ := zstd.NewWriter(&b)
		e.Write(data)
		e.Close()
	case Gzip:
		w := gzip.NewWriter(&b)
		w.Write(data)
		w.Close()
	case Snappy:
		return s2.EncodeSnappy(nil, data)
	case LZ4Raw:
		out := make([]byte, lz4.CompressBlockBound(len(data)))
		n, err := lz4.CompressBlock(data, out, nil)
		if err != nil {
			panic(err)
		}
		if n == 0 { // incompressible: a block of literals
			return lz4Literals(data)
		}
		return out[:n]
	case LZ4Frame:
		w := lz4.NewWriter(&b)
		w.Write(data)
		w.Close()
	case LZ4Hadoop:
		block := Compress(LZ4Raw, data)
		out := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		return append(out, block...)
	case Brotli:
		w := brotli.NewWriterLevel(&b, 5)
		w.Write(data)
		w.Close()
	case BZ2:
		if len(data)%(4<<20) != 0 || !bytes.Equal(data, make([]byte, len(data))) {
			panic("hostiletest: bzip2 (no writer in Go) compresses zeros only, 4 MiB at a time")
		}
		return bz2Zeros(int64(len(data)), false)
	default:
		panic("hostiletest: no codec " + codec)
	}
	return b.Bytes()
}

// lz4Literals is an LZ4 block of data as literals alone.
func lz4Literals(data []byte) []byte {
	n := len(data)
	var out []byte
	if n < 15 {
		out = append(out, byte(n)<<4)
	} else {
		out = append(out, 0xf0)
		for m := n - 15; ; m -= 255 {
			if m < 255 {
				out = append(out, byte(m))
				break
			}
			out = append(out, 255)
		}
	}
	return append(out, data...)
}

// Bomb returns data in codec that inflates to n zero bytes (bzip2: at
// least n), about as small as the codec allows and made in about the
// time of its bytes, not of n: ZSTD as RLE blocks of 128 KiB, 4 bytes
// each (2 GiB in 64 KiB), with or without a content size; an LZ4 block as
// one match of n − 6 bytes (a byte of extension per 255); an LZ4 frame as
// one frame of blocks of 4 MiB of zeros, repeated; gzip as members of
// 1 MiB of zeros, repeated (gzip concatenates); bzip2 as streams of
// 4 MiB, repeated, after streams of each smaller block size. Brotli has neither
// concatenation nor a cheap hand-made form: its writer compresses n
// zeros (about 0.1 s for 64 MiB, 6 s with the race detector). A Snappy
// block cannot inflate more than about 21 times, so its bomb is the
// attack Snappy allows instead: a header claiming n bytes (at most
// 4 GiB − 1) before a body of a few, since a decoder allocates what the
// header claims.
func Bomb(codec string, n int64) []byte {
	switch codec {
	case ZSTD, ZSTDNoSize:
		return zstdRLE(n, codec == ZSTD)
	case Snappy:
		if n > 1<<32-1 {
			panic("hostiletest: a Snappy header holds at most 4 GiB − 1")
		}
		b := binary.AppendUvarint(nil, uint64(n))
		return append(b, s2.EncodeSnappy(nil, make([]byte, 64))[1:]...)
	case BZ2:
		return bz2Zeros(n, true)
	case LZ4Frame:
		return lz4FrameZeros(n)
	case Gzip:
		// Members of 1 MiB of zeros, and one of the rest.
		const unit = 1 << 20
		member := Compress(codec, make([]byte, unit))
		var b []byte
		for range n / unit {
			b = append(b, member...)
		}
		if r := n % unit; r > 0 {
			b = append(b, Compress(codec, make([]byte, r))...)
		}
		return b
	case Brotli:
		var b bytes.Buffer
		// The largest window, whose ring buffer a decoder allocates.
		w := brotli.NewWriterOptions(&b, brotli.WriterOptions{Quality: 1, LGWin: 24})
		zeros := make([]byte, 1<<20)
		for left := n; left > 0; left -= int64(len(zeros)) {
			w.Write(zeros[:min(left, int64(len(zeros)))])
		}
		w.Close()
		return b.Bytes()
	case LZ4Raw:
		return lz4Zeros(n)
	case LZ4Hadoop:
		block := lz4Zeros(n)
		out := binary.BigEndian.AppendUint32(nil, uint32(n))
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		return append(out, block...)
	}
	panic("hostiletest: no codec " + codec)
}

// lz4FrameZeros is one LZ4 frame of n zeros: the writer's block of 4 MiB
// of zeros, repeated, and a block of the rest (no checksums, so that the
// blocks repeat).
func lz4FrameZeros(n int64) []byte {
	const unit = 4 << 20
	frame := func(k int64) []byte {
		var b bytes.Buffer
		w := lz4.NewWriter(&b)
		if err := w.Apply(lz4.ChecksumOption(false), lz4.BlockSizeOption(lz4.Block4Mb)); err != nil {
			panic(err)
		}
		w.Write(make([]byte, k))
		w.Close()
		return b.Bytes()
	}
	whole := frame(unit)
	header, block := whole[:7], whole[7:len(whole)-4] // the header; the block before the end mark
	out := bytes.Clone(header)
	for range n / unit {
		out = append(out, block...)
	}
	if r := n % unit; r > 0 {
		rest := frame(r)
		out = append(out, rest[7:len(rest)-4]...)
	}
	return append(out, 0, 0, 0, 0)
}

// lz4Zeros is an LZ4 block of n zeros (13 ≤ n < 2^32): a literal zero,
// one match at offset 1 of n − 6 bytes, and the five literals a block
// ends with.
func lz4Zeros(n int64) []byte {
	if n < 13 || n >= 1<<32 {
		panic("hostiletest: an LZ4 block of zeros of 13 bytes to 4 GiB")
	}
	b := []byte{1<<4 | 15, 0, 1, 0} // 1 literal, a match of 19 or more; the literal; offset 1
	for m := n - 6 - 4 - 15; ; m -= 255 {
		if m < 255 {
			b = append(b, byte(m))
			break
		}
		b = append(b, 255)
	}
	return append(b, 5<<4, 0, 0, 0, 0, 0)
}

// zstdRLE is a ZSTD frame of RLE blocks of zeros, n bytes in all, its
// window 128 KiB, with its content size in its header or not.
func zstdRLE(n int64, withSize bool) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	if withSize {
		b = append(b, 0xC0, 0x38) // an 8-byte content size; a window of 2^17
		b = binary.LittleEndian.AppendUint64(b, uint64(n))
	} else {
		b = append(b, 0x00, 0x38) // no content size; a window of 2^17
	}
	const block = 128 << 10
	for left := n; ; left -= block {
		size := min(left, block)
		last := uint32(0)
		if left <= block {
			last = 1
		}
		h := uint32(size)<<3 | 1<<1 | last // RLE
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 0)
		if last == 1 {
			return b
		}
	}
}

// bz2Unit is bzip2's stream of 4 MiB of zeros (`bzip2 -9`, 48 bytes):
// Go has no bzip2 writer. Streams concatenate.
const bz2Unit = "425a68393141592653595602e2880020204800c00000040008200030cc0529a6" +
	"0201b10201e2ee48a70a120ac05c5100"

// bz2Levels is bzip2's streams of one zero byte at block sizes 100 kB to
// 800 kB (levels 1 to 8), 296 bytes: each makes a reader allocate a
// larger table than the one before.
const bz2Levels = "425a6831314159265359b1f7404b00000040004000200021184682ee48a70a12" +
	"163ee80960425a6832314159265359b1f7404b00000040004000200021184682" +
	"ee48a70a12163ee80960425a6833314159265359b1f7404b0000004000400020" +
	"0021184682ee48a70a12163ee80960425a6834314159265359b1f7404b000000" +
	"40004000200021184682ee48a70a12163ee80960425a6835314159265359b1f7" +
	"404b00000040004000200021184682ee48a70a12163ee80960425a6836314159" +
	"265359b1f7404b00000040004000200021184682ee48a70a12163ee80960425a" +
	"6837314159265359b1f7404b00000040004000200021184682ee48a70a12163e" +
	"e80960425a6838314159265359b1f7404b00000040004000200021184682ee48" +
	"a70a12163ee80960"

// bz2Zeros is bzip2 streams of at least n zeros: whole units of 4 MiB,
// after bz2Levels' streams (8 zeros more) when levels is set.
func bz2Zeros(n int64, levels bool) []byte {
	unit, err := hex.DecodeString(bz2Unit)
	if err != nil {
		panic(err)
	}
	var b []byte
	if levels {
		if b, err = hex.DecodeString(bz2Levels); err != nil {
			panic(err)
		}
	}
	for left := n; left > 0; left -= 4 << 20 {
		b = append(b, unit...)
	}
	return b
}
