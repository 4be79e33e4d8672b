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
	"io"

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
		return bz2Zeros(int64(len(data)))
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
// least n), about as small as the codec allows: ZSTD as RLE blocks of
// 128 KiB, 4 bytes each (2 GiB in 64 KiB), with or without a content
// size; gzip, LZ4 and Brotli as their writers compress zeros. A Snappy
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
		return bz2Zeros(n)
	case Gzip, Brotli, LZ4Frame:
		var b bytes.Buffer
		var w io.WriteCloser
		switch codec {
		case Gzip:
			w, _ = gzip.NewWriterLevel(&b, gzip.BestCompression)
		case Brotli:
			// The largest window, whose ring buffer a decoder allocates.
			w = brotli.NewWriterOptions(&b, brotli.WriterOptions{Quality: 1, LGWin: 24})
		default:
			w = lz4.NewWriter(&b)
		}
		zeros := make([]byte, 1<<20)
		for left := n; left > 0; left -= int64(len(zeros)) {
			w.Write(zeros[:min(left, int64(len(zeros)))])
		}
		w.Close()
		return b.Bytes()
	case LZ4Raw, LZ4Hadoop:
		if n > 1<<31 {
			panic("hostiletest: an LZ4 block of at most 2 GiB")
		}
		return Compress(codec, make([]byte, n))
	}
	panic("hostiletest: no codec " + codec)
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

// bz2Zeros is bzip2 streams of at least n zeros: whole units of 4 MiB.
func bz2Zeros(n int64) []byte {
	unit, err := hex.DecodeString(bz2Unit)
	if err != nil {
		panic(err)
	}
	var b []byte
	for left := n; left > 0; left -= 4 << 20 {
		b = append(b, unit...)
	}
	return b
}
