package parquet

import (
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format/internal/inflate"
)

// inflateOf is the codec package inflate decodes each Parquet codec with
// (Parquet's deprecated LZ4 is hadoopLZ4, which decodes through it too).
var inflateOf = map[compress.Compression]inflate.Codec{
	compress.Codecs.Zstd:   inflate.ZSTD,
	compress.Codecs.Snappy: inflate.Snappy,
	compress.Codecs.Gzip:   inflate.Gzip,
	compress.Codecs.Brotli: inflate.Brotli,
	compress.Codecs.Lz4Raw: inflate.LZ4Block,
}

// Every codec a page is decompressed with, by arrow-go's page reader,
// flatCol or the token counter, is arrow-go's table's: registered again
// there at init, so that no page inflates past the size its header states
// (package inflate). arrow-go's own ZSTD decodes a frame with no content
// size whole, however large (a 66 KB file whose page states 1.6 MB took a
// node to 6 GB), and its Snappy allocates what a block's header claims.
// Encoding is arrow-go's (tests write Parquet with it).
func init() {
	for c, ic := range inflateOf {
		orig, err := compress.GetCodec(c)
		if err != nil {
			panic(err)
		}
		compress.RegisterCodec(c, boundedCodec{Codec: orig, codec: ic})
	}
}

// boundedCodec is an arrow-go codec whose decode writes at most dst's
// length, the page's stated size. It offers no stream (arrow-go then
// never streams a page, which Brand does not ask it to).
type boundedCodec struct {
	compress.Codec // arrow-go's: encoding
	codec          inflate.Codec
}

func (b boundedCodec) DecodeWithError(dst, src []byte) ([]byte, error) {
	return inflate.Into(b.codec, dst, src)
}

// Decode gives nil for bytes that do not decode, never a panic:
// arrow-go's compress.Decode, which Brand calls, asks DecodeWithError,
// which says why.
func (b boundedCodec) Decode(dst, src []byte) []byte {
	out, err := b.DecodeWithError(dst, src)
	if err != nil {
		return nil
	}
	return out
}

// inflateWorking is what decompressing a page of n bytes with codec
// allocates beside the page's buffer, at most (inflate.Working).
func inflateWorking(codec int8, n int64) int64 {
	if codec == int8(compress.Codecs.Lz4) {
		return inflate.Working(inflate.LZ4Frame, n)
	}
	if ic, ok := inflateOf[compress.Compression(codec)]; ok {
		return inflate.Working(ic, n)
	}
	return 0
}
