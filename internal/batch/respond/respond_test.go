package respond

import (
	"bytes"
	"errors"
	"net"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
)

// recordingWriter keeps every write's length and the bytes.
type recordingWriter struct {
	bytes.Buffer
	writes []int
	failAt int // fail the write that would make this many writes; 0: never
}

func (r *recordingWriter) Write(p []byte) (int, error) {
	r.writes = append(r.writes, len(p))
	if r.failAt > 0 && len(r.writes) == r.failAt {
		return 0, errors.New("connection reset")
	}
	return r.Buffer.Write(p)
}

func TestBatchWriterCoalescesSmallSamples(t *testing.T) {
	// A pool may hand out a larger buffer than asked for: writes stay
	// coalesceBuffer long.
	pool := largerBuffers{}
	var want bytes.Buffer
	sizes := []int{100, 5000, 70000, 300000, 300000, 300000, 400000, 1, 3 << 20, 2}
	for i := range 200 {
		sizes = append(sizes, 1000+i*37)
	}
	w := &recordingWriter{}
	bw := &bodyWriter{w: w, buf: pool.Get(coalesceBuffer), buffers: pool}
	for i, n := range sizes {
		p := bytes.Repeat([]byte{byte(i)}, n)
		want.Write(p)
		if err := bw.write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := bw.flush(); err != nil {
		t.Fatal(err)
	}
	bw.release()
	if !bytes.Equal(w.Bytes(), want.Bytes()) {
		t.Fatal("the bytes written differ from the samples in order")
	}
	if bw.n != int64(want.Len()) {
		t.Errorf("counted %d bytes, wrote %d", bw.n, want.Len())
	}
	for i, n := range w.writes {
		if n > coalesceBuffer && n != 3<<20 {
			t.Errorf("write %d of %d bytes exceeds the buffer", i, n)
		}
	}
	// 210 samples: the large ones alone, the small ones in a few writes.
	if len(w.writes) > 20 {
		t.Errorf("%d writes for %d samples: small samples were not coalesced (%v)", len(w.writes), len(sizes), w.writes)
	}

	// A failed write is reported, with the bytes that did go out.
	w = &recordingWriter{failAt: 2}
	bw = &bodyWriter{w: w, buf: pool.Get(coalesceBuffer), buffers: pool}
	var err error
	for _, n := range []int{2 << 20, 2 << 20, 2 << 20} {
		if err = bw.write(make([]byte, n)); err != nil {
			break
		}
	}
	if err == nil || bw.n != 2<<20 {
		t.Errorf("after a failed write: err %v, %d bytes counted; want an error and %d", err, bw.n, 2<<20)
	}
}

// TestCut: a body is written in segments of at most the segment size,
// splitting a part where it must, and the segments hold its bytes in
// order.
func TestCut(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int
		seg   int
		want  []int // segment lengths
	}{
		{"empty", nil, 4, nil},
		{"one small", []int{3}, 4, []int{3}},
		{"exact", []int{2, 2, 4}, 4, []int{4, 4}},
		{"split", []int{3, 3, 3}, 4, []int{4, 4, 1}},
		{"a part over several segments", []int{1, 10, 1}, 4, []int{4, 4, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var parts net.Buffers
			var want []byte
			for i, n := range tc.sizes {
				p := bytes.Repeat([]byte{byte('a' + i)}, n)
				parts = append(parts, p)
				want = append(want, p...)
			}
			var got []byte
			var lens []int
			for len(parts) > 0 {
				var seg net.Buffers
				seg, parts = cut(parts, tc.seg)
				lens = append(lens, int(segmentLen(seg)))
				for _, p := range seg {
					got = append(got, p...)
				}
			}
			if !slices.Equal(lens, tc.want) || !bytes.Equal(got, want) {
				t.Fatalf("segments %v (%q), want %v (%q)", lens, got, tc.want, want)
			}
		})
	}
}

// TestWriteStream: a body of parts and further parts from Next is written
// whole, in order, each Next's parts released once written, and a Next
// that fails ends the write with ErrShort.
func TestWriteStream(t *testing.T) {
	wr := New(Config{})
	blocks := [][]byte{bytes.Repeat([]byte("a"), 3), bytes.Repeat([]byte("b"), Segment+5), bytes.Repeat([]byte("c"), 7)}
	var want []byte
	for _, b := range blocks {
		want = append(want, b...)
	}
	tests := []struct {
		name    string
		failAt  int // the Next call that fails; 0: none
		wantErr error
	}{
		{"whole", 0, nil},
		{"cut short", 2, ErrShort},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next, released := 1, 0
			p := Payload{Parts: net.Buffers{blocks[0]}, N: int64(len(want)), Next: func() (net.Buffers, func(), error) {
				if next == tc.failAt {
					return nil, nil, errors.New("store gone")
				}
				if next == len(blocks) {
					return nil, nil, nil
				}
				b := blocks[next]
				next++
				return net.Buffers{b}, func() { released++ }, nil
			}}
			rec := httptest.NewRecorder()
			n, err := wr.Write(rec, httptest.NewRequest("GET", "/", nil), "application/octet-stream", p)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil {
				if n != int64(len(want)) || !bytes.Equal(rec.Body.Bytes(), want) {
					t.Fatalf("wrote %d bytes, want %d in order", n, len(want))
				}
				if released != len(blocks)-1 {
					t.Errorf("%d of %d streamed parts released", released, len(blocks)-1)
				}
			}
			if got := rec.Header().Get("Content-Length"); got != strconv.Itoa(len(want)) {
				t.Errorf("Content-Length %s, want %d", got, len(want))
			}
		})
	}
}

// largerBuffers hands out buffers four times as large as asked.
type largerBuffers struct{}

func (largerBuffers) Get(n int64) []byte { return make([]byte, 0, 4*n) }
func (largerBuffers) Put([]byte)         {}
