package sequences

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/seqpack"
)

// inline runs the work on the caller's goroutine, a few at a time, and
// counts the bytes it hands out.
type inline struct {
	mu   sync.Mutex
	held int64
}

func (w *inline) Run(_ context.Context, n int, f func(int)) error {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
	return nil
}

func (w *inline) Buffer(_ context.Context, n int64, _ bool) ([]byte, func(), error) {
	w.mu.Lock()
	w.held += n
	w.mu.Unlock()
	return make([]byte, 0, n), func() { w.mu.Lock(); w.held -= n; w.mu.Unlock() }, nil
}

func (w *inline) Decode(context.Context, int64, bool) (func(), error) { return func() {}, nil }

// docSample is a document's sample as a resident form holds it: a tar
// member key.npy with the tokens in dtype descr.
func docSample(t testing.TB, key, descr string, size int, tokens []int64) []byte {
	t.Helper()
	b, err := npy.AppendHeader(nil, descr, []int64{int64(len(tokens))})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range tokens {
		switch size {
		case 1:
			b = append(b, byte(v))
		case 2:
			b = binary.LittleEndian.AppendUint16(b, uint16(v))
		case 4:
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		case 8:
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	if err := tw.WriteHeader(&tar.Header{Name: key + ".npy", Size: int64(len(b)), Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write(b)
	tw.Flush()
	return out.Bytes()
}

// read decodes a packed body into sequences (key → input_ids,
// position_ids), as archive/tar and a .npy reader see them.
func read(t testing.TB, body []byte) map[string][2][]int32 {
	t.Helper()
	out := map[string][2][]int32{}
	tr := tar.NewReader(bytes.NewReader(body))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		d, err := parseNPY(b, "int32")
		if err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		v := make([]int32, d.count)
		for i := range v {
			v[i], _ = d.token(i)
		}
		key, ext, _ := strings.Cut(h.Name, ".")
		s := out[key]
		switch ext {
		case "input_ids.npy":
			s[0] = v
		case "position_ids.npy":
			s[1] = v
		default:
			t.Fatalf("member %s", h.Name)
		}
		out[key] = s
	}
}

// Pack writes each sequence's tokens converted to int32, the EOS after a
// concat piece that ends its document, the pad, and position_ids that
// restart at each piece and run over the pad; every dtype reads alike.
func TestPack(t *testing.T) {
	for _, dt := range []struct {
		descr, dtype string
		size         int
	}{{"|u1", "uint8", 1}, {"|i1", "int8", 1}, {"<u2", "uint16", 2}, {"<i2", "int16", 2}, {"<i4", "int32", 4}, {"<u4", "uint32", 4}, {"<i8", "int64", 8}, {"<u8", "uint64", 8}} {
		t.Run(dt.dtype, func(t *testing.T) {
			docs := [][]byte{
				docSample(t, "a/0", dt.descr, dt.size, []int64{1, 2, 3, 4, 5}),
				docSample(t, "a/1", dt.descr, dt.size, []int64{10, 11}),
				docSample(t, "a/2", dt.descr, dt.size, []int64{20, 21, 22, 23, 24, 25, 26}),
			}
			seqs := []seqpack.Sequence{
				{Pieces: []seqpack.Piece{{Doc: 7, Offset: 0, Len: 5}, {Doc: 8, Offset: 0, Len: 2}}, Pad: 1},
				{Pieces: []seqpack.Piece{{Doc: 9, Offset: 4, Len: 4, EOS: true}, {Doc: 8, Offset: 0, Len: 3, EOS: true}, {Doc: 9, Offset: 0, Len: 1}}},
			}
			at := [][]int{{0, 1}, {2, 1, 2}}
			w := &inline{}
			s := New(Config{Workers: w, MaxBytes: 1 << 20})
			out, err := s.Pack(context.Background(), Request{Spec: Spec{Seq: 8, Pad: 99, EOS: 77, DType: dt.dtype},
				Keys: []string{"seq/0/0000000000", "seq/0/0000000001"}, Seqs: seqs, At: at, Docs: docs, Split: 2})
			if err != nil {
				t.Fatal(err)
			}
			if out.Bytes != 2*SequenceBytes(8) || w.held != out.Bytes {
				t.Fatalf("%d bytes, %d held, want %d", out.Bytes, w.held, 2*SequenceBytes(8))
			}
			var body []byte
			for _, p := range out.Parts {
				body = append(body, p...)
			}
			got := read(t, append(body, make([]byte, 1024)...))
			want := map[string][2][]int32{
				"seq/0/0000000000": {{1, 2, 3, 4, 5, 10, 11, 99}, {0, 1, 2, 3, 4, 0, 1, 0}},
				"seq/0/0000000001": {{24, 25, 26, 77, 10, 11, 77, 20}, {0, 1, 2, 3, 0, 1, 2, 0}},
			}
			for k, v := range want {
				if !equal(got[k][0], v[0]) || !equal(got[k][1], v[1]) {
					t.Errorf("%s: %v %v, want %v %v", k, got[k][0], got[k][1], v[0], v[1])
				}
			}
			if f := s.Figures(); f.Sequences != 2 || f.Tokens != 16 || f.NonPad != 15 || f.Split != 2 {
				t.Errorf("figures %+v", f)
			}
			out.Release()
			if w.held != 0 {
				t.Errorf("%d bytes held after Release", w.held)
			}
		})
	}
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// What cannot be served right is refused, naming the document, and
// nothing is held: an ID int32 cannot hold, a negative one, a document
// shorter than its pieces, one of another dtype, a sample without a
// .npy, a batch over the bound.
func TestPackRefuses(t *testing.T) {
	one := []seqpack.Sequence{{Pieces: []seqpack.Piece{{Doc: 0, Len: 3}}, Pad: 1}}
	for _, tc := range []struct {
		name  string
		doc   []byte
		dtype string
		max   int64
		err   error
	}{
		{"an ID past int32", docSample(t, "d", "<u4", 4, []int64{1, 1 << 31, 2}), "uint32", 0, ErrTokenID},
		{"an ID past int32 in int64", docSample(t, "d", "<i8", 8, []int64{1, 1 << 40, 2}), "int64", 0, ErrTokenID},
		{"a negative ID", docSample(t, "d", "|i1", 1, []int64{1, -3, 2}), "int8", 0, ErrTokenID},
		{"a document shorter than its piece", docSample(t, "d", "<u2", 2, []int64{1, 2}), "uint16", 0, ErrDocument},
		{"another dtype", docSample(t, "d", "<u2", 2, []int64{1, 2, 3}), "int32", 0, ErrDocument},
		{"floats", docSample(t, "d", "<f4", 4, []int64{1, 2, 3}), "", 0, ErrDocument},
		{"no .npy", []byte(strings.Repeat("\x00", 1024)), "", 0, ErrDocument},
		{"over the bound", docSample(t, "d", "<u2", 2, []int64{1, 2, 3}), "uint16", SequenceBytes(4) - 1, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &inline{}
			_, err := New(Config{Workers: w, MaxBytes: tc.max}).Pack(context.Background(), Request{Spec: Spec{Seq: 4, DType: tc.dtype},
				Keys: []string{"k"}, Seqs: one, At: [][]int{{0}}, Docs: [][]byte{tc.doc}, Names: []string{"doc/0"}})
			if !errors.Is(err, tc.err) {
				t.Fatalf("%v, want %v", err, tc.err)
			}
			if tc.err != ErrTooLarge && !strings.Contains(err.Error(), "doc/0") && !strings.Contains(err.Error(), "sequence k") {
				t.Errorf("%v names neither the document nor the sequence", err)
			}
			if w.held != 0 {
				t.Errorf("%d bytes held after a refusal", w.held)
			}
		})
	}
}

// Every sequence's bytes are what SequenceBytes says, whatever seq, so a
// batch's length is known before it is read; the .npy header is NumPy's.
func TestSizes(t *testing.T) {
	for _, seq := range []int{1, 7, 128, 4096, 100000, seqpack.MaxSeq} {
		out := make([]byte, MemberBytes(seq))
		data := member(out, memberHeader(), seq, "seq/0/0000000000.input_ids.npy")
		if len(data) != 4*seq {
			t.Fatalf("seq %d: room for %d bytes", seq, len(data))
		}
		d, err := parseNPY(out[block:block+npyLen(seq)+4*seq], "int32")
		if err != nil || d.count != seq || npyLen(seq) != 128 {
			t.Fatalf("seq %d: %v, %d tokens, header %d", seq, err, d.count, npyLen(seq))
		}
		h, err := tar.NewReader(bytes.NewReader(out)).Next()
		if err != nil || h.Size != int64(npyLen(seq)+4*seq) {
			t.Fatalf("seq %d: %v %+v", seq, err, h)
		}
	}
}

// A document's sample that is not one plain ustar member — a long name
// (PAX), another member beside its .npy — is read by archive/tar with the
// same result as the plain one; two .npy members are refused.
func TestParseDocForms(t *testing.T) {
	toks := []int64{5, 6, 7}
	plain := docSample(t, "a", "<u2", 2, toks)
	long := docSample(t, strings.Repeat("k", 150), "<u2", 2, toks)
	var two bytes.Buffer
	tw := tar.NewWriter(&two)
	tw.WriteHeader(&tar.Header{Name: "a.txt", Size: 2, Mode: 0o644, Typeflag: tar.TypeReg})
	tw.Write([]byte("hi"))
	tw.Flush()
	two.Write(plain)
	if _, ok := plainMember(plain); !ok {
		t.Fatal("a plain member not read as one")
	}
	for name, b := range map[string][]byte{"plain": plain, "pax": long, "two members": two.Bytes()} {
		if _, ok := plainMember(b); ok && name != "plain" {
			t.Errorf("%s read as one plain member", name)
		}
		d, err := parseDoc(b, "uint16")
		if err != nil || d.count != 3 {
			t.Fatalf("%s: %v, %d tokens", name, err, d.count)
		}
		for i, want := range toks {
			if v, _ := d.token(i); int64(v) != want {
				t.Fatalf("%s: token %d is %d", name, i, v)
			}
		}
	}
	twice := append(slices.Clone(plain), plain...)
	if _, err := parseDoc(twice, "uint16"); !errors.Is(err, ErrDocument) {
		t.Fatalf("two .npy members: %v", err)
	}
}
