package inflate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/brandgw/brand/format/hostiletest"
)

// streamData is data with long runs and random stretches, so that every
// codec writes both literals and copies of every length.
func streamData(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 0, n)
	for len(b) < n {
		switch r.IntN(3) {
		case 0:
			b = append(b, bytes.Repeat([]byte{byte(r.IntN(256))}, r.IntN(70_000))...)
		case 1:
			for range r.IntN(20_000) {
				b = append(b, byte(r.IntN(256)))
			}
		default:
			if len(b) > 10 {
				at := r.IntN(len(b) - 1)
				b = append(b, b[at:min(len(b), at+r.IntN(5000))]...)
			}
		}
	}
	return b[:n]
}

// TestStream: every codec's stream reads what its writers write, exactly,
// read in small pieces; damaged data fails (or reads otherwise) rather
// than read as the data.
func TestStream(t *testing.T) {
	data := streamData(3 << 20)
	for name, c := range codecOf {
		t.Run(name, func(t *testing.T) {
			want := data
			if c == BZ2 {
				t.Skip("bzip2 is MDS's, read whole")
			}
			src := hostiletest.Compress(name, want)
			if c == Snappy {
				src = snappyFragments(want)
			}
			r, err := Stream(c, src)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var got bytes.Buffer
			if _, err := io.CopyBuffer(&got, struct{ io.Reader }{r}, make([]byte, 777)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("%d bytes read, %d written; equal: %v", got.Len(), len(want), bytes.Equal(got.Bytes(), want))
			}
			bad := bytes.Clone(src)
			for i := len(bad) / 3; i < len(bad)/3+64 && i < len(bad); i++ {
				bad[i] ^= 0xa5
			}
			if r, err := Stream(c, bad); err == nil {
				got, err := io.ReadAll(r)
				if err == nil && bytes.Equal(got, want) {
					t.Fatal("damaged data read as the data")
				}
			}
		})
	}
}

// snappyFragments is data as one Snappy block written as the reference
// compressor writes it: fragments of 64 KiB, each compressed alone.
func snappyFragments(data []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(data)))
	for at := 0; at < len(data); at += 64 << 10 {
		frag := data[at:min(len(data), at+64<<10)]
		block := s2.EncodeSnappy(nil, frag)
		_, k := binary.Uvarint(block)
		b = append(b, block[k:]...)
	}
	return b
}

// TestStreamWindow: a Snappy block whose copies reach further back than
// SnappyWindow (s2's Snappy-compatible blocks may) fails with ErrWindow,
// and its bytes are good (Into reads them); a copy from before the
// block's start is damage.
func TestStreamWindow(t *testing.T) {
	lit := streamData(2*SnappyWindow + 100)
	back := len(lit) - 50
	// A literal, then a copy of 30 bytes from near its start: a
	// literal's length in 4 bytes (tag 63<<2), a copy's offset in 4.
	src := binary.AppendUvarint(nil, uint64(len(lit)+30))
	src = binary.LittleEndian.AppendUint32(append(src, 63<<2), uint32(len(lit)-1))
	src = append(src, lit...)
	src = binary.LittleEndian.AppendUint32(append(src, (30-1)<<2|3), uint32(back))
	want := append(bytes.Clone(lit), lit[len(lit)-back:][:30]...)
	if got, err := Into(Snappy, make([]byte, len(want)), src); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Into: %v", err)
	}
	r, _ := Stream(Snappy, src)
	if _, err := io.ReadAll(r); !errors.Is(err, ErrWindow) {
		t.Fatalf("a copy from %d bytes back: %v; want ErrWindow", back, err)
	}
	// A literal "a", then a copy of 4 bytes from 2 back.
	bad := binary.AppendUvarint(nil, 5)
	bad = append(bad, 0<<2|0, 'a', 0<<2|1, 2)
	r, _ = Stream(Snappy, bad)
	if _, err := io.ReadAll(r); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a copy from before the start: %v; want ErrCorrupt", err)
	}
}

// TestStreamMemory: reading 64 MiB of each stream allocates its window,
// not the data.
func TestStreamMemory(t *testing.T) {
	data := bytes.Repeat(streamData(1<<20), 64)
	for name, c := range map[string]Codec{hostiletest.Snappy: Snappy, hostiletest.LZ4Raw: LZ4Block, hostiletest.ZSTD: ZSTD, hostiletest.Gzip: Gzip} {
		src := hostiletest.Compress(name, data)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r, err := Stream(c, src)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, make([]byte, 32<<10))
		r.Close()
		runtime.ReadMemStats(&after)
		if err != nil || n != int64(len(data)) {
			t.Fatalf("%s: %d bytes: %v", name, n, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > StreamWindow+4<<20 {
			t.Errorf("%s: streaming %d MiB allocated %d KiB", name, len(data)>>20, got>>10)
		}
	}
}

// TestStreamKeep: a stream that keeps what its reader reads
// (Streams.Keep) reads a copy from past its window where the copy's
// source was read, fails with ErrWindow where it was skipped, and passes
// over it either way; whatever it hands out is the data, under any
// pattern of reads and skips of s2's Snappy blocks (which copy from
// anywhere in the block).
func TestStreamKeep(t *testing.T) {
	lit := streamData(3 * SnappyWindow)
	// A literal, then a copy of 30 bytes of its first 100.
	src := binary.AppendUvarint(nil, uint64(len(lit)+30))
	src = binary.LittleEndian.AppendUint32(append(src, 63<<2), uint32(len(lit)-1))
	src = append(src, lit...)
	src = binary.LittleEndian.AppendUint32(append(src, (30-1)<<2|3), uint32(len(lit)-70))
	for _, tc := range []struct {
		name      string
		readFirst bool
		want      error
	}{{"its source read", true, nil}, {"its source skipped", false, ErrWindow}} {
		s := &Streams{Keep: true}
		r, _ := s.Open(Snappy, src)
		first := make([]byte, 100)
		if tc.readFirst {
			if _, err := io.ReadFull(r, first); err != nil || !bytes.Equal(first, lit[:100]) {
				t.Fatalf("%s: the first bytes: %v", tc.name, err)
			}
		} else if _, err := r.(Skipper).Skip(100); err != nil {
			t.Fatal(err)
		}
		if _, err := r.(Skipper).Skip(int64(len(lit) - 100)); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if tc.want == nil && (err != nil || !bytes.Equal(got, lit[70:100])) || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: the copy reads %q, %v; want %v", tc.name, got, err, tc.want)
		}
	}

	// Values sharing prefixes across long stretches, as a dictionary of
	// conversations holds them, read or skipped at random.
	rnd := rand.New(rand.NewPCG(5, 6))
	var data []byte
	for k := range 40 {
		data = append(data, "<image>\nDescribe it. "...)
		if k%7 == 3 {
			data = append(data, streamData(2*SnappyWindow+rnd.IntN(SnappyWindow))...)
		}
		data = append(data, byte(k))
	}
	block := s2.EncodeSnappyBetter(nil, data)
	for range 20 {
		s := &Streams{Keep: true}
		r, _ := s.Open(Snappy, block)
		at := 0
		for at < len(data) {
			n := min(len(data)-at, 1+rnd.IntN(3*SnappyWindow))
			if rnd.IntN(2) == 0 {
				if _, err := r.(Skipper).Skip(int64(n)); err != nil {
					t.Fatal(err)
				}
				at += n
				continue
			}
			got := make([]byte, n)
			k, err := io.ReadFull(r, got)
			if errors.Is(err, ErrWindow) {
				break
			}
			if err != nil || !bytes.Equal(got[:k], data[at:at+k]) {
				t.Fatalf("bytes %d+%d: %v; not the data", at, n, err)
			}
			at += n
		}
	}
	s := &Streams{Keep: true}
	r, _ := s.Open(Snappy, block)
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read whole, keeping it: %v", err)
	}
}
