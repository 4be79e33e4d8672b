package hostiletest

import (
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"io"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Each codec's bomb, read by the codec's own library with no bound,
// inflates to exactly the zeros it says (bzip2: at least); Snappy's header claims them; and data Compress makes reads
// back as itself.
func TestBombs(t *testing.T) {
	const n = 8<<20 + 12345
	for _, c := range Codecs {
		t.Run(c, func(t *testing.T) {
			b := Bomb(c, n)
			var got []byte
			var err error
			switch c {
			case ZSTD, ZSTDNoSize:
				d, _ := zstd.NewReader(nil)
				got, err = d.DecodeAll(b, nil)
			case Snappy:
				var claim int
				claim, err = s2.DecodedLen(b)
				if claim != n {
					t.Fatalf("claims %d", claim)
				}
				return
			case Gzip:
				var r *gzip.Reader
				if r, err = gzip.NewReader(bytes.NewReader(b)); err == nil {
					got, err = io.ReadAll(r)
				}
			case LZ4Raw, LZ4Hadoop:
				if c == LZ4Hadoop {
					if binary.BigEndian.Uint32(b) != n || int(binary.BigEndian.Uint32(b[4:])) != len(b)-8 {
						t.Fatalf("Hadoop framing %x", b[:8])
					}
					b = b[8:]
				}
				got = make([]byte, n+100)
				var m int
				m, err = lz4.UncompressBlock(b, got)
				got = got[:m]
			case LZ4Frame:
				got, err = io.ReadAll(lz4.NewReader(bytes.NewReader(b)))
			case Brotli:
				got, err = io.ReadAll(brotli.NewReader(bytes.NewReader(b)))
			case BZ2:
				got, err = io.ReadAll(bzip2.NewReader(bytes.NewReader(b)))
				if err == nil && len(got) >= n && bytes.Equal(got, make([]byte, len(got))) {
					return
				}
			}
			if err != nil || len(got) != n || !bytes.Equal(got, make([]byte, n)) {
				t.Fatalf("%d bytes of %s inflate to %d bytes (%v)", len(b), c, len(got), err)
			}
			t.Logf("%d bytes inflate to %d", len(b), n)
		})
	}
	data := Plain(Image, 50)
	for _, c := range ParquetCodecs {
		if c == LZ4Hadoop || c == LZ4Raw {
			continue // blocks: read by UncompressBlock above
		}
		p := Honest(Image, c, 50)
		if p.States != int64(len(data)) || bytes.Equal(p.Body, data) {
			t.Errorf("%s: an honest page of %d bytes stating %d", c, len(p.Body), p.States)
		}
	}
}
