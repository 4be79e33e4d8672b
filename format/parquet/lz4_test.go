package parquet

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format/internal/inflate"
)

// An LZ4 page that decodes as none of Hadoop's framing, a bare block or a
// frame is an error wrapping package inflate's sentinel (which the decoder
// reports as the chunk's damage, a 502), whichever way arrow-go's codec
// interface is asked: never a panic.
func TestLZ4DamagedBlock(t *testing.T) {
	hadoop := func(unc int, block []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(unc))
		b = binary.BigEndian.AppendUint32(b, uint32(len(block)))
		return append(b, block...)
	}
	cases := []struct {
		name string
		src  []byte
		unc  int
	}{
		// A literal run whose length bytes run past the block.
		{"truncated literal", []byte{0xff, 0xff, 0xff, 0xff}, 64},
		// A match reaching back before the block's first byte.
		{"match before start", []byte{0x10, 'a', 0xff, 0x00}, 64},
		// Hadoop's header, then a block that is not LZ4.
		{"hadoop framed garbage", hadoop(64, []byte{0xf0, 0xf0, 0xf0, 0xf0, 0xf0}), 64},
		// A frame's magic and a header cut short.
		{"truncated frame", []byte{0x04, 0x22, 0x4d, 0x18, 0x64}, 64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			codec, err := compress.GetCodec(compress.Codecs.Lz4)
			if err != nil {
				t.Fatal(err)
			}
			var out []byte
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("Decode panicked: %v", p)
					}
				}()
				out = codec.Decode(make([]byte, c.unc), c.src)
			}()
			if out != nil {
				t.Fatalf("Decode of damaged bytes gave %d bytes, want nil", len(out))
			}
			_, err = compress.Decode(codec, make([]byte, c.unc), c.src)
			if !errors.Is(err, inflate.ErrCorrupt) && !errors.Is(err, inflate.ErrOver) {
				t.Fatalf("compress.Decode: %v, want an error wrapping inflate.ErrCorrupt or ErrOver", err)
			}
		})
	}
}

// The bounded codecs (every other compressed codec) give nil from Decode
// too, and their error from compress.Decode.
func TestBoundedCodecDecodeDoesNotPanic(t *testing.T) {
	for c := range inflateOf {
		t.Run(c.String(), func(t *testing.T) {
			codec, err := compress.GetCodec(c)
			if err != nil {
				t.Fatal(err)
			}
			src := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("Decode panicked: %v", p)
					}
				}()
				if out := codec.Decode(make([]byte, 64), src); out != nil {
					t.Fatalf("Decode of damaged bytes gave %d bytes, want nil", len(out))
				}
			}()
			if _, err := compress.Decode(codec, make([]byte, 64), src); !errors.Is(err, inflate.ErrCorrupt) && !errors.Is(err, inflate.ErrOver) {
				t.Fatalf("compress.Decode: %v, want an error wrapping inflate.ErrCorrupt or ErrOver", err)
			}
		})
	}
}
