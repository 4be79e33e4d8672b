package parquet

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/pierrec/lz4/v4"

	"github.com/brandgw/brand/format/internal/inflate"
)

// hadoopLZ4 is Parquet's deprecated LZ4 codec (codec 5), which arrow-go
// leaves out: what writers put in such pages is Hadoop's framing — blocks
// of a big-endian uncompressed length, then chunks of a big-endian
// compressed length and an LZ4 block — or, from old Arrow C++ writers, a
// bare LZ4 block, or an LZ4 frame. It reads each, as Arrow C++ does, and
// writes Hadoop's framing (for tests).
type hadoopLZ4 struct{}

// Registered once, at init, in arrow-go's table of codecs: arrow-go
// finds a page's codec there and offers no other way in.
func init() { compress.RegisterCodec(compress.Codecs.Lz4, hadoopLZ4{}) }

func (hadoopLZ4) DecodeWithError(dst, src []byte) ([]byte, error) {
	if out, ok := hadoopDecode(dst, src); ok {
		return out, nil
	}
	if n, err := lz4.UncompressBlock(src, dst); err == nil {
		return dst[:n], nil
	}
	out, err := inflate.Into(inflate.LZ4Frame, dst, src)
	if err != nil {
		// inflate's error says whether the bytes are corrupt or inflate
		// past the page's size: the page's damage, kept for errors.Is.
		return nil, fmt.Errorf("lz4 neither Hadoop-framed nor a block; as a frame: %w", err)
	}
	return out, nil
}

// hadoopDecode decodes Hadoop's framing into dst, which is the page's
// uncompressed size: anything that does not fit it exactly is not.
func hadoopDecode(dst, src []byte) ([]byte, bool) {
	n := 0
	for len(src) > 0 {
		if len(src) < 8 {
			return nil, false
		}
		want := int(binary.BigEndian.Uint32(src))
		src = src[4:]
		if want > len(dst)-n {
			return nil, false
		}
		for got := 0; got < want; {
			if len(src) < 4 {
				return nil, false
			}
			clen := int(binary.BigEndian.Uint32(src))
			src = src[4:]
			if clen > len(src) {
				return nil, false
			}
			m, err := lz4.UncompressBlock(src[:clen], dst[n+got:n+want])
			if err != nil {
				return nil, false
			}
			got += m
			src = src[clen:]
		}
		n += want
	}
	return dst[:n], n == len(dst)
}

// Decode is arrow-go's codec interface without an error: bytes that do
// not decode give nil, never a panic (a damaged page is the file's fault,
// not the server's). arrow-go's compress.Decode, which Brand calls, asks
// DecodeWithError instead, which says why.
func (c hadoopLZ4) Decode(dst, src []byte) []byte {
	out, err := c.DecodeWithError(dst, src)
	if err != nil {
		return nil
	}
	return out
}

func (hadoopLZ4) Encode(dst, src []byte) []byte {
	bound := 8 + lz4.CompressBlockBound(len(src))
	if cap(dst) < bound {
		dst = make([]byte, bound)
	}
	dst = dst[:bound]
	var c lz4.Compressor
	n, err := c.CompressBlock(src, dst[8:])
	if err != nil {
		panic(err)
	}
	binary.BigEndian.PutUint32(dst, uint32(len(src)))
	binary.BigEndian.PutUint32(dst[4:], uint32(n))
	return dst[:8+n]
}

func (c hadoopLZ4) EncodeLevel(dst, src []byte, _ int) []byte { return c.Encode(dst, src) }

func (hadoopLZ4) CompressBound(n int64) int64 { return 8 + int64(lz4.CompressBlockBound(int(n))) }

// The page reader asks a codec for streams only when streaming pages,
// which Brand leaves off.
func (hadoopLZ4) NewReader(r io.Reader) io.ReadCloser { return io.NopCloser(lz4.NewReader(r)) }

func (hadoopLZ4) NewWriter(w io.Writer) io.WriteCloser { return lz4.NewWriter(w) }

func (hadoopLZ4) NewWriterLevel(w io.Writer, _ int) (io.WriteCloser, error) {
	return lz4.NewWriter(w), nil
}
