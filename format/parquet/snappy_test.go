package parquet

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
)

// readPieces decodes block b of n bytes with snappyStream, a piece of
// each length of cuts at a time (cycled), every piece its own slice, as
// values and lengths are each their own slice in a page.
func readPieces(b []byte, n int, cuts []int) ([]byte, error) {
	var s snappyStream
	if err := s.reset(b, n); err != nil {
		return nil, err
	}
	return readStream(&s, cuts)
}

// readPiecesFrom is readPieces with the block read from a reader, which
// gives at most half of what each read asks (the block followed by bytes
// not its own, left unread), through a buffer of 16 bytes.
func readPiecesFrom(b []byte, n int, cuts []int) ([]byte, error) {
	after := []byte("not the block's")
	r := bufio.NewReaderSize(iotest.HalfReader(bytes.NewReader(append(slices.Clip(b), after...))), 16)
	var s snappyStream
	if err := s.resetFrom(r, len(b), n); err != nil {
		return nil, err
	}
	out, err := readStream(&s, cuts)
	if err != nil {
		return nil, err
	}
	if rest, _ := io.ReadAll(r); !bytes.Equal(rest, after) {
		return nil, fmt.Errorf("the block read, %q is left after it, want %q", rest, after)
	}
	return out, nil
}

func readStream(s *snappyStream, cuts []int) ([]byte, error) {
	var out []byte
	for i := 0; s.remaining() > 0; i++ {
		k := min(max(cuts[i%len(cuts)], 1), s.remaining())
		p := make([]byte, k)
		if err := s.read(p); err != nil {
			return nil, err
		}
		out = append(out, p...)
	}
	if !s.done() {
		return nil, errSnappyCorrupt
	}
	return out, nil
}

// snappyBlock builds a block by hand: the decoded length, then elements.
func snappyBlock(n int, elems ...[]byte) []byte {
	b := binary.AppendUvarint(nil, uint64(n))
	for _, e := range elems {
		b = append(b, e...)
	}
	return b
}

func literal(s string) []byte {
	n := len(s) - 1
	switch {
	case n < 60:
		return append([]byte{byte(n) << 2}, s...)
	case n < 1<<8:
		return append([]byte{60 << 2, byte(n)}, s...)
	}
	return append([]byte{61 << 2, byte(n), byte(n >> 8)}, s...)
}

func copy1(n, off int) []byte { return []byte{byte(off>>8)<<5 | byte(n-4)<<2 | 1, byte(off)} }
func copy2(n, off int) []byte { return []byte{byte(n-1)<<2 | 2, byte(off), byte(off >> 8)} }
func copy4(n, off int) []byte {
	return []byte{byte(n-1)<<2 | 3, byte(off), byte(off >> 8), byte(off >> 16), byte(off >> 24)}
}

// TestSnappyStream decodes blocks, read in pieces of every size, to the
// bytes klauspost/compress's decoder gives, and refuses what snappy
// refuses: a copy before the output's start or of offset 0 (S2's repeat),
// a literal past the input, more or fewer bytes than the block states,
// bytes after its last element.
func TestSnappyStream(t *testing.T) {
	abc := "abcdefghijklmnopqrstuvwxyz"
	long := string(bytes.Repeat([]byte("0123456789"), 10))
	tests := []struct {
		name string
		b    []byte
		n    int
		want string // "" with err
		err  bool
	}{
		{"literal", snappyBlock(3, literal("abc")), 3, "abc", false},
		{"a long literal", snappyBlock(100, literal(long)), 100, long, false},
		{"a copy of a pattern (offset 1: a run)", snappyBlock(9, literal("x"), copy1(8, 1)), 9, "xxxxxxxxx", false},
		{"a copy overlapping itself (offset 3)", snappyBlock(11, literal("abc"), copy1(8, 3)), 11, "abcabcabcab", false},
		{"a copy from a piece before", snappyBlock(52, literal(abc), copy2(26, 26)), 52, abc + abc, false},
		{"a copy with a 32-bit offset", snappyBlock(36, literal(abc), copy4(10, 26)), 36, abc + "abcdefghij", false},
		{"a copy with an 11-bit offset over 255", snappyBlock(300+5, literal(long+long+long), copy1(5, 300)), 305, long + long + long + "01234", false},
		{"a copy before the output's start", snappyBlock(6, literal("abc"), copy1(4, 5)), 0, "", true},
		{"a copy of offset 0 (S2's repeat)", snappyBlock(7, literal("abc"), copy1(4, 0)), 0, "", true},
		{"a literal past the input", snappyBlock(5, []byte{4 << 2}, []byte("ab")), 0, "", true},
		{"a literal past the output", snappyBlock(2, literal("abc")), 0, "", true},
		{"a copy past the output", snappyBlock(5, literal("abc"), copy1(4, 3)), 0, "", true},
		{"fewer bytes than stated", snappyBlock(5, literal("abc")), 0, "", true},
		{"bytes after the last element", snappyBlock(3, literal("abc"), []byte{0}), 0, "", true},
		{"another length than the page's", snappyBlock(3, literal("abc")), 4, "", true},
		{"an element cut short", snappyBlock(8, literal("abc"), []byte{2}), 0, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.n
			if n == 0 {
				n, _ = snappy.DecodedLen(tc.b)
			}
			for _, cut := range [][]int{{1}, {2}, {3, 1}, {5}, {7}, {1 << 20}} {
				for from, read := range []func([]byte, int, []int) ([]byte, error){readPieces, readPiecesFrom} {
					got, err := read(tc.b, n, cut)
					if tc.err {
						if err == nil {
							t.Fatalf("pieces %v, from a reader %t: %q, want an error", cut, from == 1, got)
						}
						continue
					}
					if err != nil || string(got) != tc.want {
						t.Fatalf("pieces %v, from a reader %t: %q, %v; want %q", cut, from == 1, got, err, tc.want)
					}
					if lib, err := s2.Decode(nil, tc.b); err != nil || !bytes.Equal(lib, got) {
						t.Fatalf("the library decodes %q, %v", lib, err)
					}
				}
			}
		})
	}
}

// FuzzSnappyStream: what snappy encodes decodes to itself in any pieces;
// on any bytes at all, the stream never panics, and what it decodes the
// library decodes the same (the stream is stricter only where S2 extends
// snappy).
func FuzzSnappyStream(f *testing.F) {
	f.Add([]byte("hello, hello, hello, world"), uint64(1), false)
	f.Add(bytes.Repeat([]byte("\xff\xd8\xff\xe0photo"), 300), uint64(7), false)
	f.Add(snappyBlock(11, literal("abc"), copy1(8, 3)), uint64(3), true)
	f.Fuzz(func(t *testing.T, data []byte, seed uint64, raw bool) {
		r := rand.New(rand.NewPCG(seed, 1))
		cuts := make([]int, 1+r.IntN(8))
		for i := range cuts {
			cuts[i] = 1 + r.IntN(64)
			if r.IntN(4) == 0 {
				cuts[i] = 1 + r.IntN(1<<16)
			}
		}
		if !raw {
			enc := snappy.Encode(nil, data)
			got, err := readPieces(enc, len(data), cuts)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("round trip of %d bytes in pieces %v: %d bytes, %v", len(data), cuts, len(got), err)
			}
			got, err = readPiecesFrom(enc, len(data), cuts)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("round trip of %d bytes from a reader in pieces %v: %d bytes, %v", len(data), cuts, len(got), err)
			}
			return
		}
		n, err := snappy.DecodedLen(data)
		if err != nil || n > 1<<20 {
			return
		}
		got, err := readPieces(data, n, cuts)
		if err != nil {
			return
		}
		lib, lerr := s2.Decode(nil, data)
		if lerr != nil || !bytes.Equal(lib, got) {
			t.Fatalf("the stream decodes %d bytes, the library %d (%v)", len(got), len(lib), lerr)
		}
		if from, err := readPiecesFrom(data, n, cuts); err != nil || !bytes.Equal(from, got) {
			t.Fatalf("from a reader the stream decodes %d bytes (%v), from memory %d", len(from), err, len(got))
		}
	})
}
