package tokenize

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

func goldenBytes(t testing.TB, kind string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/golden-" + kind + ".model")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestLoadRefuses: files that are not models, and models the reference
// or this package refuses, each with its error.
func TestLoadRefuses(t *testing.T) {
	bpeModel, uniModel := goldenBytes(t, "bpe"), goldenBytes(t, "unigram")
	random := make([]byte, 4096)
	g := textGen{s: 1}
	for i := range random {
		random[i] = byte(g.next())
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(uniModel)
	w.Close()
	descriptor, err := proto.Marshal(protodesc.ToFileDescriptorProto(descriptorpb.File_google_protobuf_descriptor_proto))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(data []byte, f func(mp *modelProto)) []byte { return editModel(data, f) }
	tooMany := func() []byte { // MaxPieces+1 empty pieces: counted, never allocated
		var b []byte
		for range MaxPieces + 1 {
			b = protowire.AppendTag(b, fieldPieces, protowire.BytesType)
			b = protowire.AppendBytes(b, nil)
		}
		return b
	}
	tests := []struct {
		name string
		data []byte
		want error
		says string
	}{
		{"empty", nil, ErrNotModel, "empty"},
		{"random bytes", random, ErrNotModel, ""},
		{"truncated to 1 byte", uniModel[:1], ErrNotModel, ""},
		{"truncated to half", uniModel[:len(uniModel)/2], ErrNotModel, ""},
		{"truncated by 1 byte", bpeModel[:len(bpeModel)-1], ErrNotModel, ""},
		{"gzip of a model", gz.Bytes(), ErrNotModel, ""},
		{"another protobuf (a FileDescriptorProto)", descriptor, ErrNotModel, ""},
		{"a protobuf without pieces", protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.VarintType), 1), ErrNotModel, "no pieces"},
		{"a tokenizer.json of a unigram model", []byte(`{"version": "1.0", "model": {"type": "Unigram", "vocab": [["<unk>", 0.0]]}}`), ErrUnsupported, "model.type \"Unigram\""},
		{"too large", make([]byte, MaxModelBytes+1), ErrTooLarge, ""},
		{"too many pieces", tooMany(), ErrTooLarge, "pieces"},
		{"no unknown piece", edit(uniModel, func(mp *modelProto) { mp.pieces[0].typ = pieceControl }), ErrNotModel, "unknown piece"},
		{"two unknown pieces", edit(uniModel, func(mp *modelProto) { mp.pieces[1].typ = pieceUnknown }), ErrNotModel, "second unknown"},
		{"an empty piece", edit(uniModel, func(mp *modelProto) { mp.pieces[5].s = "" }), ErrNotModel, "empty"},
		{"a piece twice", edit(uniModel, func(mp *modelProto) { mp.pieces[6].s = mp.pieces[5].s }), ErrNotModel, "twice"},
		{"a byte piece without byte fallback", edit(uniModel, func(mp *modelProto) { mp.pieces[5] = piece{s: "<0x41>", typ: pieceByte} }), ErrNotModel, "byte fallback"},
		{"a byte piece misnamed", edit(bpeModel, func(mp *modelProto) { setType(mp, "<0x41>", pieceNormal); setType(mp, "▁the", pieceByte) }), ErrNotModel, "<0xXX>"},
		{"byte fallback without a byte piece", edit(bpeModel, func(mp *modelProto) { setType(mp, "<0x41>", pieceNormal) }), ErrNotModel, "<0x41>"},
		{"a NUL in a piece", edit(uniModel, func(mp *modelProto) { mp.pieces[5].s = "a\x00b" }), ErrUnsupported, "NUL"},
		{"a word model", edit(uniModel, func(mp *modelProto) { mp.trainer.modelType = modelTypeWord }), ErrUnsupported, "word"},
		{"a char model", edit(uniModel, func(mp *modelProto) { mp.trainer.modelType = modelTypeChar }), ErrUnsupported, "char"},
		{"a unigram model of control pieces only", edit(uniModel, func(mp *modelProto) {
			for i := range mp.pieces {
				if mp.pieces[i].typ != pieceUnknown {
					mp.pieces[i].typ = pieceControl
				}
			}
		}), ErrNotModel, "unigram"},
		{"a normalization map of 4 bytes", edit(uniModel, func(mp *modelProto) { mp.norm.charsMap = "\x00\x00\x00\x00" }), ErrNotModel, "broken"},
		{"a normalization map's trie past its end", edit(uniModel, func(mp *modelProto) { mp.norm.charsMap = "\x08\x00\x00\x00abcd" }), ErrNotModel, "exceeds"},
		{"a BPE piece too long", edit(bpeModel, func(mp *modelProto) { mp.pieces[500].s = strings.Repeat("x", maxBPEPiece+1) }), ErrTooLarge, "bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Load(tt.data)
			if !errors.Is(err, tt.want) || m != nil {
				t.Fatalf("Load = %v, %v; want %v", m, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Load's error %q does not say %q", err, tt.says)
			}
		})
	}
}

// TestDamagedMap: a normalization map whose walk leaves its array loads
// (nothing says so until a text reaches it) and then fails that text
// with ErrDamagedModel, leaving dst as it was.
func TestDamagedMap(t *testing.T) {
	data := editModel(goldenBytes(t, "unigram"), func(mp *modelProto) {
		// One unit, the root, whose offset points far outside the array.
		mp.norm.charsMap = "\x04\x00\x00\x00" + string([]byte{0x00, 0xFC, 0xFF, 0x7F}) + "x\x00"
	})
	m, err := Load(data)
	if err != nil {
		t.Fatal(err)
	}
	dst := []int32{7}
	got, err := m.Append(dst, []byte("hello"))
	if !errors.Is(err, ErrDamagedModel) || !slices.Equal(got, dst) {
		t.Fatalf("Append = %v, %v; want [7], ErrDamagedModel", got, err)
	}
}

// TestLoadAllocation: hostile models at the bounds allocate in proportion
// to their files (loadAllocBound), however many pieces or bytes they
// declare. Allocation is counted (TotalAlloc), not timed.
func TestLoadAllocation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds models of hundreds of megabytes to allocate")
	}
	bpeModel, uniModel := goldenBytes(t, "bpe"), goldenBytes(t, "unigram")
	manyPieces := func(mp *modelProto) {
		mp.norm.charsMap = ""
		for i := len(mp.pieces); i < MaxPieces; i++ {
			mp.pieces = append(mp.pieces, piece{s: "p" + strconv.Itoa(i), typ: pieceNormal})
		}
	}
	longUserDefined := func(mp *modelProto) {
		mp.norm.charsMap = ""
		mp.pieces = append(mp.pieces, piece{s: strings.Repeat("x", MaxPieceBytes/2), typ: pieceUserDefined})
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"BPE of MaxPieces pieces", editModel(bpeModel, manyPieces)},
		{"unigram of MaxPieces pieces", editModel(uniModel, manyPieces)},
		{"BPE with a long user-defined symbol", editModel(bpeModel, longUserDefined)},
		{"unigram with a long user-defined symbol", editModel(uniModel, longUserDefined)},
		{"BPE with nmt_nfkc", bpeModel},
	} {
		var err error
		got := allocated(func() { _, err = Load(c.data) })
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if bound := loadAllocBound(len(c.data)); got > bound {
			t.Errorf("%s: Load of %d bytes allocated %d bytes, more than %d", c.name, len(c.data), got, bound)
		}
		t.Logf("%s: %d bytes, %d MB allocated (%.1f times)", c.name, len(c.data), got>>20, float64(got)/float64(len(c.data)))
	}
}

// loadAllocBound is what Load may allocate for a file of n bytes.
func loadAllocBound(n int) uint64 { return 4<<20 + 40*uint64(n) }

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestEncodeBounds: a text over MaxTextBytes is refused; Append appends.
func TestEncodeBounds(t *testing.T) {
	m, err := Load(goldenBytes(t, "bpe"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Encode(make([]byte, MaxTextBytes+1)); !errors.Is(err, ErrTextTooLong) {
		t.Errorf("Encode of %d bytes: %v, want ErrTextTooLong", MaxTextBytes+1, err)
	}
	alone, err := m.Encode([]byte("hello world"))
	if err != nil || len(alone) == 0 {
		t.Fatalf("Encode = %v, %v", alone, err)
	}
	got, err := m.Append([]int32{-5, -6}, []byte("hello world"))
	if err != nil || !slices.Equal(got, append([]int32{-5, -6}, alone...)) {
		t.Errorf("Append = %v, %v; want [-5 -6] then %v", got, err, alone)
	}
}

// TestConcurrent: one model shared by goroutines gives each text the IDs
// it gives alone (run with -race).
func TestConcurrent(t *testing.T) {
	texts := referenceTexts()[:400]
	for _, kind := range []string{"bpe", "unigram"} {
		m, err := Load(goldenBytes(t, kind))
		if err != nil {
			t.Fatal(err)
		}
		want := make([][]int32, len(texts))
		for i, s := range texts {
			if want[i], err = m.Encode([]byte(s)); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var buf []int32
				for k := range texts {
					i := (k*7 + w*13) % len(texts)
					b, err := m.Append(buf[:0], []byte(texts[i]))
					if buf = b; err != nil || !slices.Equal(buf, want[i]) {
						t.Errorf("%s: text %d differs when shared (%v)", kind, i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}
