// Package inflate decompresses data whose decompressed size a file
// states before it is read — a Parquet page, an MDS shard — within that
// size, whatever the compressed bytes say: every codec the formats read
// (ZSTD with and without a frame content size, Snappy, gzip, Brotli, LZ4
// blocks and frames, bzip2) writes into the caller's buffer of the
// stated length and stops there. Bytes that would inflate past it fail
// with ErrOver before the codec's library allocates for them, so a
// decompression bomb — 64 KiB of ZSTD RLE blocks with no content size
// that inflate to 2 GiB, a Snappy header claiming 4 GiB — costs what its
// stated size allows, never what its bytes claim.
//
// # Why not the libraries' defaults
//
// klauspost/compress's zstd DecodeAll grows its output to whatever the
// frame holds (up to 64 GiB) unless told to stop at the buffer's capacity
// (WithDecodeAllCapLimit); Snappy's Decode allocates the length its
// header claims when the buffer is smaller; arrow-go's codecs call both
// so. The streaming readers (gzip, Brotli, LZ4 frames, bzip2) are read
// into the buffer and asked for one byte more.
//
// # Memory
//
// Beside the caller's buffer a decompression allocates at most
// Working(codec, n): a codec's fixed state (a window, tables), and for
// ZSTD the one reallocation of its output that a frame inflating past the
// buffer can cause before the library notices (it checks after each
// block). TestWorking measures every codec against it on bombs.
//
// # Streams
//
// Stream reads the same data through a window of its output rather than
// into a buffer of its size: a reader of a Parquet page that needs its
// values' lengths, not their bytes, passes over a 100 MB value holding
// a window (StreamWindow for ZSTD, SnappyWindow for Snappy, 64 KiB for
// LZ4 blocks). Bytes that reach back past it fail with ErrWindow: the
// caller decompresses them whole, as before.
//
// # Concurrency
//
// Into is safe for concurrent use; each Stream is one reader's. The ZSTD decoder is one for the
// process, made at the first use, shared as arrow-go's is: it holds no
// data between calls.
package inflate

import (
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/brandgw/brand/internal/errkind"
	"io"
	"strings"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// ErrOver marks bytes that inflate past the size stated for them.
var ErrOver = errkind.New(errkind.Internal, "inflates past its stated size")

// ErrCorrupt marks bytes that do not decompress.
var ErrCorrupt = errkind.New(errkind.Internal, "does not decompress")

// Codec is a compression a format's data may use.
type Codec uint8

const (
	// ZSTD is Zstandard frames, with or without a content size.
	ZSTD Codec = iota + 1
	// Snappy is a Snappy block (Parquet's SNAPPY), not the framed stream.
	Snappy
	// Gzip is gzip members, one or several.
	Gzip
	// Brotli is a Brotli stream.
	Brotli
	// LZ4Block is a bare LZ4 block (Parquet's LZ4_RAW).
	LZ4Block
	// LZ4Frame is an LZ4 frame.
	LZ4Frame
	// BZ2 is a bzip2 stream.
	BZ2
)

func (c Codec) String() string {
	switch c {
	case ZSTD:
		return "zstd"
	case Snappy:
		return "snappy"
	case Gzip:
		return "gzip"
	case Brotli:
		return "brotli"
	case LZ4Block:
		return "lz4 block"
	case LZ4Frame:
		return "lz4 frame"
	case BZ2:
		return "bzip2"
	}
	return fmt.Sprintf("codec %d", uint8(c))
}

// Into decompresses src into dst and returns the part of dst written:
// at most len(dst) bytes, the size the file states (a caller that needs
// exactly that many checks the length). Bytes that would inflate past it
// fail with an error wrapping ErrOver; bytes that do not decompress,
// with one wrapping ErrCorrupt. It allocates at most Working(c,
// len(dst)) bytes beside dst.
func Into(c Codec, dst, src []byte) ([]byte, error) {
	dst = dst[:len(dst):len(dst)]
	switch c {
	case ZSTD:
		return zstdInto(dst, src)
	case Snappy:
		return snappyInto(dst, src)
	case LZ4Block:
		n, err := lz4.UncompressBlock(src, dst)
		if err != nil {
			// pierrec/lz4 tells a block that does not fit from a damaged
			// one by neither; either is past what the page states or not
			// LZ4.
			return nil, fmt.Errorf("%w: lz4 block: %v (or %w: more than %d bytes)", ErrCorrupt, err, ErrOver, len(dst))
		}
		return dst[:n], nil
	case Gzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, corrupt(c, err)
		}
		defer r.Close()
		return readInto(c, dst, r)
	case Brotli:
		return readInto(c, dst, brotli.NewReader(bytes.NewReader(src)))
	case LZ4Frame:
		n, err := lz4FrameLen(src)
		if err != nil {
			return nil, corrupt(c, err)
		}
		if n != len(src) {
			// pierrec/lz4 reads frames that follow as one stream, each
			// with buffers of its own: a page holds one frame.
			return nil, corrupt(c, fmt.Errorf("%d bytes after the frame", len(src)-n))
		}
		return readInto(c, dst, lz4.NewReader(bytes.NewReader(src)))
	case BZ2:
		return readInto(c, dst, bzip2.NewReader(bytes.NewReader(src)))
	}
	return nil, fmt.Errorf("inflate: no codec %d", uint8(c))
}

// corrupt is err, a codec's library's, as ErrCorrupt naming the codec
// (once: some libraries name it already).
func corrupt(c Codec, err error) error {
	if strings.HasPrefix(err.Error(), c.String()+":") {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, c, err)
}

// readInto reads a stream's decompressed bytes into dst, and one byte
// more to tell a stream that ends there from one that goes on.
func readInto(c Codec, dst []byte, r io.Reader) ([]byte, error) {
	n, err := io.ReadFull(r, dst)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return dst[:n], nil
	case err != nil:
		return nil, corrupt(c, err)
	}
	var one [1]byte
	for {
		m, err := r.Read(one[:])
		if m > 0 {
			return nil, fmt.Errorf("%w: %s: more than %d bytes", ErrOver, c, len(dst))
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, corrupt(c, err)
		}
	}
}

// lz4FrameLen is the length of the LZ4 frame src starts with, from its
// header and its blocks' sizes (the frame format's, lz4_Frame_format.md).
func lz4FrameLen(src []byte) (int, error) {
	le := binary.LittleEndian
	if len(src) < 7 || le.Uint32(src) != 0x184D2204 {
		return 0, errors.New("not an LZ4 frame")
	}
	flg := src[4]
	if flg>>6 != 1 {
		return 0, fmt.Errorf("frame version %d", flg>>6)
	}
	at := 7 // magic, FLG, BD, and the header's checksum
	if flg&0x08 != 0 {
		at += 8 // content size
	}
	if flg&0x01 != 0 {
		at += 4 // dictionary ID
	}
	for {
		if at+4 > len(src) {
			return 0, errors.New("a frame cut short")
		}
		size := le.Uint32(src[at:])
		at += 4
		if size == 0 { // the end mark
			break
		}
		at += int(size & 0x7fffffff)
		if flg&0x10 != 0 {
			at += 4 // the block's checksum
		}
		if at > len(src) {
			return 0, errors.New("a block past the frame's end")
		}
	}
	if flg&0x04 != 0 {
		at += 4 // the content's checksum
	}
	if at > len(src) {
		return 0, errors.New("a frame cut short")
	}
	return at, nil
}

// snappyInto checks the length a Snappy block's header claims before
// decoding it: s2.Decode allocates that much when dst is smaller.
func snappyInto(dst, src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, corrupt(Snappy, err)
	}
	if n > len(dst) {
		return nil, fmt.Errorf("%w: snappy: its header says %d bytes, more than %d", ErrOver, n, len(dst))
	}
	out, err := s2.Decode(dst[:n], src)
	if err != nil {
		return nil, corrupt(Snappy, err)
	}
	return out, nil
}

// zstdDecoder is the process's ZSTD decoder for DecodeAll: limited to
// its output buffer's capacity, so that a frame with no content size
// stops where the stated size does (a frame whose content size is larger
// is refused before anything is allocated for it).
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderConcurrency(0))
})

func zstdInto(dst, src []byte) ([]byte, error) {
	d, err := zstdDecoder()
	if err != nil {
		return nil, err
	}
	out, err := d.DecodeAll(src, dst[:0])
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrFrameSizeExceeded):
		return nil, fmt.Errorf("%w: zstd: more than %d bytes", ErrOver, len(dst))
	case err != nil:
		return nil, corrupt(ZSTD, err)
	case len(out) > len(dst) || len(out) > 0 && &out[0] != &dst[:1][0]:
		// Never expected of the cap limit: told, not trusted.
		return nil, fmt.Errorf("%w: zstd: %d bytes decoded outside the %d-byte buffer", ErrOver, len(out), len(dst))
	}
	return out, nil
}

// Working is what Into allocates beside dst, at most, decompressing into
// a dst of n bytes with codec c (TestWorking measures each on bombs):
//
//   - ZSTD: the one reallocation of the output a frame inflating past n
//     makes (the library checks its size after each block of at most
//     128 KiB, appending the block first: Go grows a large slice by a
//     quarter, or by the block), and a block decoder's buffer of 128 KiB
//     the first time it meets an RLE block (the decoders are the
//     process's, made once, one a core);
//   - Brotli: a ring buffer of up to 16 MiB (the format's largest window
//     without the large-window extension, which its decoder refuses),
//     twice while the decoder grows it to the window, and its tables;
//   - LZ4 frames: two blocks of up to 4 MiB (one frame: a frame after it
//     is refused, since the library would give each buffers of its own);
//   - bzip2: a table of 4 bytes a byte of a block, made again for each
//     stream whose blocks are larger than the last's (streams
//     concatenate): 18 MB for streams of every block size, 100 kB to
//     900 kB;
//   - gzip: a 32 KiB window and its tables; LZ4 and Snappy blocks: none;
//
// and for every codec a few KiB of readers and errors.
func Working(c Codec, n int64) int64 {
	const base = 16 << 10
	switch c {
	case ZSTD:
		return base + n + max(n/4, 256<<10) + 256<<10
	case Brotli:
		return base + 34<<20
	case LZ4Frame:
		return base + 9<<20
	case BZ2:
		return base + 19<<20
	case Gzip:
		return base + 256<<10
	}
	return base
}
