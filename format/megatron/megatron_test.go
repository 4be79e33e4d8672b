package megatron

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

type prefixSpec struct {
	Name       string    `json:"name"`
	DType      string    `json:"dtype"`
	Seed       int       `json:"seed"`
	Docs       [][]int32 `json:"docs"`
	Multimodal bool      `json:"multimodal,omitempty"`
}

// writePython has testdata/megatron_writer.py write the prefixes into a
// new directory, or check the tar of decoded samples against them.
func writePython(t *testing.T, py, cmd string, ps []prefixSpec, path string) {
	t.Helper()
	spec := filepath.Join(t.TempDir(), "spec.json")
	b, _ := json.Marshal(map[string]any{"prefixes": ps})
	if err := os.WriteFile(spec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, py, "testdata/megatron_writer.py", cmd, spec, path).CombinedOutput(); err != nil {
		t.Fatalf("megatron_writer.py %s: %v\n%s", cmd, err, out)
	}
}

func indexSource(t testing.TB, s *decodetest.Store, opt format.Options) (*format.Layout, format.Decoder, error) {
	t.Helper()
	lay, err := Format{}.Index(context.Background(), s, s.List(), opt)
	if err != nil {
		return nil, nil, err
	}
	dec, err := Format{}.Open(lay.Meta)
	if err != nil {
		t.Fatalf("Open of Index's own meta: %v", err)
	}
	return lay, dec, nil
}

// The Python writer's datasets decode to exactly the tokens it wrote,
// with every dtype, documents of several sequences, empty documents and
// documents larger than the chunk size; indexing reads only the .idx.
func TestPythonWriter(t *testing.T) {
	py := pythontest.Need(t, "scripts/ensure-numpy.sh", "numpy")
	docs := [][]int32{{3, 5}, {0}, {}, {700}, {1}, {2, 2, 2}, {40}, {1}}
	for _, dt := range []string{"uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"} {
		t.Run(dt, func(t *testing.T) {
			ps := []prefixSpec{
				{Name: "en/wiki_text_document", DType: dt, Seed: 1, Docs: docs},
				{Name: "code.py_text_document", DType: dt, Seed: 2, Docs: docs[:3]},
				{Name: "empty", DType: dt, Seed: 3},
			}
			dir := t.TempDir()
			writePython(t, py, "make", ps, dir)
			s := decodetest.LoadDir(t, dir)
			// 2.5 KiB: a few short documents a chunk, the 700-token one alone.
			lay, dec, err := indexSource(t, s, format.Options{ChunkBytes: 2500})
			if err != nil {
				t.Fatal(err)
			}
			for k, n := range s.Read {
				if !strings.HasSuffix(k, ".idx") || n != int64(len(s.Objs[k])) {
					t.Errorf("indexing read %d bytes of %s", n, k)
				}
			}
			if len(lay.Keys) != 11 || lay.Keys[0] != "code.py_text_document/000000000" || lay.Keys[3] != "en/wiki_text_document/000000000" {
				t.Fatalf("keys %q", lay.Keys)
			}
			if len(lay.Chunks) < 4 {
				t.Errorf("%d chunks: the chunk size did not cut", len(lay.Chunks))
			}
			md := dec.(*Decoder)
			if md.DType() != dt {
				t.Errorf("dtype %s", md.DType())
			}
			var got []uint32
			for c := range lay.Chunks {
				got = append(got, md.DocTokens(c)...)
			}
			want := []uint32{8, 0, 0, 8, 0, 0, 700, 1, 6, 40, 1}
			if !equal(got, want) {
				t.Errorf("DocTokens %v, want %v", got, want)
			}
			tarPath := filepath.Join(t.TempDir(), "decoded.tar")
			if err := os.WriteFile(tarPath, decodetest.DecodeAll(t, s, lay, dec, nil), 0o644); err != nil {
				t.Fatal(err)
			}
			writePython(t, py, "check", ps, tarPath)
		})
	}
}

func equal(a, b []uint32) bool {
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

// A multimodal dataset (sequence modes after the document index) is
// refused as unsupported, naming the .idx.
func TestPythonMultimodal(t *testing.T) {
	py := pythontest.Need(t, "scripts/ensure-numpy.sh", "numpy")
	dir := t.TempDir()
	writePython(t, py, "make", []prefixSpec{{Name: "mm", DType: "int32", Docs: [][]int32{{2, 3}}, Multimodal: true}}, dir)
	_, _, err := indexSource(t, decodetest.LoadDir(t, dir), format.Options{})
	if !errors.Is(err, format.ErrUnsupported) || !strings.Contains(err.Error(), "mm.idx") {
		t.Fatal(err)
	}
}

// The resident bound is exact: the samples end where the table starts.
func TestBoundExact(t *testing.T) {
	s := decodetest.NewStore()
	sizes := []int32{1, 100, 0, 127, 128, 129, 1000, 3}
	s.Objs["p.idx"] = buildIdx(8, sizes, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8}, nil)
	s.Objs["p.bin"] = make([]byte, 2*(1+100+127+128+129+1000+3))
	for i := range s.Objs["p.bin"] {
		s.Objs["p.bin"][i] = byte(i)
	}
	lay, dec, err := indexSource(t, s, format.Options{ChunkBytes: 3000})
	if err != nil {
		t.Fatal(err)
	}
	for c := range lay.Chunks {
		src, resident := decodetest.ReadChunk(t, s, lay, dec, c, nil)
		dst := make([]byte, resident)
		if err := dec.Decode(c, nil, src, dst, format.WriterOptions{}); err != nil {
			t.Fatal(err)
		}
		tab, err := format.ReadTable(dst)
		if err != nil {
			t.Fatal(err)
		}
		off, n, _ := tab.Sample(tab.Len() - 1)
		if end := resident - format.Overhead(tab.Len()); off+n != end {
			t.Errorf("chunk %d: samples end at %d, the table starts at %d", c, off+n, end)
		}
		// One byte less does not fit.
		if err := dec.Decode(c, nil, src, make([]byte, resident-1), format.WriterOptions{}); !errors.Is(err, format.ErrOverBound) {
			t.Errorf("chunk %d in a byte less: %v", c, err)
		}
		// A short read is damaged.
		if len(src) > 0 {
			if err := dec.Decode(c, nil, src[1:], dst, format.WriterOptions{}); !errors.Is(err, format.ErrDamaged) {
				t.Errorf("chunk %d short: %v", c, err)
			}
		}
	}
	if len(lay.Chunks) < 3 {
		t.Errorf("%d chunks", len(lay.Chunks))
	}
}

// Keys and their lengths, which the bound counts, agree past nine digits.
func TestKeys(t *testing.T) {
	for _, d := range []int{0, 7, 999999999, 1000000000, 12345678901} {
		if k := keyOf("a/b", d); len(k) != keyLen("a/b", d) || !strings.HasPrefix(k, "a/b/") {
			t.Errorf("%d: %q, keyLen %d", d, k, keyLen("a/b", d))
		}
	}
	if k := keyOf("x", 42); k != "x/000000042" {
		t.Error(k)
	}
}

// Chunks are cut at documents: at most ChunkBytes resident unless one
// document alone is larger, and at most ChunkSamples documents.
func TestCut(t *testing.T) {
	s := decodetest.NewStore()
	n := 1000
	sizes := make([]int32, n)
	docIdx := make([]int64, n+1)
	total := 0
	for i := range sizes {
		sizes[i] = int32(i % 300)
		total += i % 300
		docIdx[i+1] = int64(i + 1)
	}
	s.Objs["p.idx"] = buildIdx(4, sizes, docIdx, nil)
	s.Objs["p.bin"] = make([]byte, 4*total)
	for _, tt := range []struct {
		chunk   int64
		samples int
	}{{1 << 20, 0}, {64 << 10, 0}, {4000, 0}, {1 << 20, 7}} {
		lay, dec, err := indexSource(t, s, format.Options{ChunkBytes: tt.chunk, Limits: format.Limits{ChunkSamples: tt.samples}})
		if err != nil {
			t.Fatal(err)
		}
		docs := 0
		var off int64
		for c, ch := range lay.Chunks {
			rs, resident := dec.Extent(c, nil)
			if resident > tt.chunk && ch.Samples > 1 {
				t.Errorf("chunk %d of %d documents: %d resident bytes, over %d", c, ch.Samples, resident, tt.chunk)
			}
			if tt.samples > 0 && ch.Samples > tt.samples {
				t.Errorf("chunk %d: %d documents", c, ch.Samples)
			}
			if len(rs) > 0 && rs[0].Off != off {
				t.Errorf("chunk %d starts at %d, the last ended at %d", c, rs[0].Off, off)
			}
			off += format.Concat(rs)
			docs += ch.Samples
		}
		if docs != n || off != int64(4*total) {
			t.Errorf("chunk %d: %d documents, %d bytes", tt.chunk, docs, off)
		}
	}
}

// Every bad input is refused at index time, naming the object and why.
func TestRefused(t *testing.T) {
	le := func(b []byte, off int, v uint64) []byte {
		b = append([]byte(nil), b...)
		for i := range 8 {
			b[off+i] = byte(v >> (8 * i))
		}
		return b
	}
	good := buildIdx(4, []int32{3, 5, 2}, []int64{0, 2, 3}, nil)
	goodBin := int64(4 * 10)
	tests := []struct {
		name    string
		objs    map[string][]byte
		sizes   map[string]int64
		limits  format.Limits
		err     error
		mention []string
	}{
		{"bin without idx", map[string][]byte{"a.bin": nil, "b.bin": nil, "b.idx": good}, nil, format.Limits{}, format.ErrInvalid, []string{`"a"`, "no a.idx"}},
		{"idx without bin", map[string][]byte{"a.idx": good}, nil, format.Limits{}, format.ErrInvalid, []string{`"a"`, "no a.bin"}},
		{"no prefix", map[string][]byte{"README.md": nil}, nil, format.Limits{}, format.ErrInvalid, []string{"no Megatron prefix"}},
		{"bin too long", map[string][]byte{"a.idx": good}, map[string]int64{"a.bin": goodBin + 4}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "total 40 bytes", "holds 44"}},
		{"bin too short", map[string][]byte{"a.idx": good}, map[string]int64{"a.bin": goodBin - 1}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "holds 39"}},
		{"pointers out of order", map[string][]byte{"a.idx": buildIdx(4, []int32{3, 5, 2}, []int64{0, 2, 3}, []int64{0, 32, 12})}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "sequence 1 starts at byte 32", "leaving a gap"}},
		{"pointers overlapping", map[string][]byte{"a.idx": buildIdx(4, []int32{3, 5, 2}, []int64{0, 2, 3}, []int64{0, 8, 28})}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "sequence 1 starts at byte 8", "overlapping"}},
		{"counts past the file", map[string][]byte{"a.idx": le(good, 18, 1<<40)}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "1099511627776 sequences"}},
		{"counts that overflow", map[string][]byte{"a.idx": le(le(good, 18, 1<<62), 26, 1<<62)}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "need more than"}},
		{"document count past the file", map[string][]byte{"a.idx": le(good, 26, 5)}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "5 document boundaries"}},
		{"unknown dtype", map[string][]byte{"a.idx": append(append(append([]byte{}, good[:17]...), 9), good[18:]...)}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "unknown dtype code 9"}},
		{"truncated", map[string][]byte{"a.idx": good[:len(good)-3]}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "need more than"}},
		{"truncated header", map[string][]byte{"a.idx": good[:20]}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "truncated"}},
		{"trailing bytes", map[string][]byte{"a.idx": append(append([]byte{}, good...), 1, 2)}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "2 bytes after"}},
		{"not an idx", map[string][]byte{"a.idx": []byte(strings.Repeat("x", 64))}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "not a Megatron index"}},
		{"version", map[string][]byte{"a.idx": le(good, 9, 2)}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "version 2"}},
		{"document index not from 0", map[string][]byte{"a.idx": buildIdx(4, []int32{3, 5, 2}, []int64{1, 2, 3}, nil)}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "runs from 1 to 3"}},
		{"document index short of S", map[string][]byte{"a.idx": buildIdx(4, []int32{3, 5, 2}, []int64{0, 2}, nil)}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "runs from 0 to 2"}},
		{"document index backwards", map[string][]byte{"a.idx": buildIdx(4, []int32{3, 5, 2}, []int64{0, 2, 1, 3}, nil)}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "document 1 ends at sequence 1"}},
		{"negative size", map[string][]byte{"a.idx": buildIdx(4, []int32{3, -5, 2}, []int64{0, 3}, nil)}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "-5 tokens"}},
		{"idx over the metadata limit", map[string][]byte{"a.idx": good}, map[string]int64{"a.bin": goodBin}, format.Limits{MetaBytes: 64}, format.ErrInvalid, []string{"a.idx", "over the metadata limit of 64"}},
		{"two dtypes", map[string][]byte{"a.idx": good, "b.idx": buildIdx(8, []int32{3}, []int64{0, 1}, nil), "b.bin": make([]byte, 6)}, map[string]int64{"a.bin": goodBin}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "b.idx", "int32", "uint16"}},
		// 10^9 int32 tokens are 4.0e9 bytes: a chunk of its own, refused
		// over a limit of 1 GiB; 10^9 int64 tokens pass the default 4 GiB.
		{"10^9 tokens over the chunk limit", map[string][]byte{"a.idx": buildIdx(4, []int32{1e9}, []int64{0, 1}, nil)}, map[string]int64{"a.bin": 4e9}, format.Limits{ChunkBytes: 1 << 30}, format.ErrInvalid, []string{"a.idx", "document 0 has 1000000000 tokens", "over the chunk limit of 1073741824"}},
		{"10^9 int64 tokens over the default limit", map[string][]byte{"a.idx": buildIdx(5, []int32{1e9}, []int64{0, 1}, nil)}, map[string]int64{"a.bin": 8e9}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "document 0 has 1000000000 tokens", "over the chunk limit of 2147483648"}},
		{"a document of 4.5·10^9 tokens in three sequences", map[string][]byte{"a.idx": buildIdx(1, []int32{1.5e9, 1.5e9, 1.5e9}, []int64{0, 3}, nil)}, map[string]int64{"a.bin": 4.5e9}, format.Limits{}, format.ErrInvalid, []string{"a.idx", "document 0 has 4500000000 tokens"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := decodetest.NewStore()
			for k, b := range tt.objs {
				s.Objs[k] = b
			}
			for k, n := range tt.sizes {
				if _, ok := s.Objs[k]; !ok {
					s.Objs[k] = nil
				}
				s.Sizes[k] = n
			}
			_, _, err := indexSource(t, s, format.Options{Limits: tt.limits})
			if !errors.Is(err, tt.err) {
				t.Fatalf("got %v, want %v", err, tt.err)
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("%q does not say %q", err, m)
				}
			}
			for k := range s.Read {
				if strings.HasSuffix(k, ".bin") {
					t.Errorf("read %s", k)
				}
			}
		})
	}
}

// Options.Members cannot rename the tokens' member: it is not ignored.
func TestMembersRefused(t *testing.T) {
	s := decodetest.NewStore()
	s.Objs["a.idx"] = buildIdx(4, []int32{3}, []int64{0, 1}, nil)
	s.Objs["a.bin"] = make([]byte, 12)
	if _, _, err := indexSource(t, s, format.Options{Members: map[string]string{"tokens": "bin"}}); !errors.Is(err, format.ErrUnsupported) {
		t.Fatal(err)
	}
	if _, _, err := indexSource(t, s, format.Options{Members: map[string]string{"tokens": "npy"}}); err != nil {
		t.Fatal(err)
	}
}

// The options that make a token dataset of another format's column are
// refused, not ignored: a Megatron dataset is one already ("tokens" is
// its field, and naming it is accepted).
func TestTokenOptionsRefused(t *testing.T) {
	s := decodetest.NewStore()
	s.Objs["a.idx"] = buildIdx(4, []int32{3}, []int64{0, 1}, nil)
	s.Objs["a.bin"] = make([]byte, 12)
	for _, opt := range []format.Options{{Tokens: "input_ids"}, {Text: "text", Tokenizer: []byte("m")}, {Vocabulary: "gpt2"}} {
		if _, _, err := indexSource(t, s, opt); !errors.Is(err, format.ErrUnsupported) {
			t.Errorf("%+v: %v", opt, err)
		}
	}
	if _, _, err := indexSource(t, s, format.Options{Tokens: "tokens"}); err != nil {
		t.Fatal(err)
	}
}

// A document of 10^9 int32 tokens is over the default chunk limit (4·10^9
// bytes of 2 GiB: it could not be cached whole), refused; under a limit
// that holds it (4 GiB − 1, the most) it is a chunk of its own, its
// bound exact.
func TestHugeDocumentAlone(t *testing.T) {
	s := decodetest.NewStore()
	s.Objs["a.idx"] = buildIdx(4, []int32{5, 1e9, 5}, []int64{0, 1, 2, 3}, nil)
	s.Objs["a.bin"] = nil
	s.Sizes["a.bin"] = 4 * (1e9 + 10)
	if _, _, err := indexSource(t, s, format.Options{}); !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), "over the chunk limit") {
		t.Fatalf("under the default limit: %v", err)
	}
	lay, dec, err := indexSource(t, s, format.Options{Limits: format.Limits{ChunkBytes: format.MaxChunkBytes}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lay.Chunks) != 3 || lay.Chunks[1].Samples != 1 {
		t.Fatalf("%+v", lay.Chunks)
	}
	rs, resident := dec.Extent(1, nil)
	want := format.MemberLen(len("a/000000001.npy"), 128+4e9) + format.Overhead(1)
	if len(rs) != 1 || rs[0] != (format.Range{Off: 20, Len: 4e9}) || resident != want {
		t.Fatalf("%+v %d, want %d", rs, resident, want)
	}
}

// Open refuses a Meta that is not one (it is stored; it may be damaged).
func TestOpenRefuses(t *testing.T) {
	s := decodetest.NewStore()
	s.Objs["p.idx"] = buildIdx(4, []int32{3, 5}, []int64{0, 1, 2}, nil)
	s.Objs["p.bin"] = make([]byte, 32)
	lay, _, err := indexSource(t, s, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range lay.Meta {
		if _, err := (Format{}).Open(lay.Meta[:i]); !errors.Is(err, format.ErrInvalid) {
			t.Errorf("meta cut at %d: %v", i, err)
		}
	}
	if _, err := (Format{}).Open(append(lay.Meta, 0)); !errors.Is(err, format.ErrInvalid) {
		t.Error("trailing byte")
	}
}

func TestDetect(t *testing.T) {
	f := Format{}
	if !f.Detect([]format.Object{{Key: "x/a.bin"}, {Key: "x/a.idx"}, {Key: "README"}}) {
		t.Error("a pair")
	}
	if f.Detect([]format.Object{{Key: "a.bin"}, {Key: "b.idx"}}) || f.Detect([]format.Object{{Key: "index.json"}}) {
		t.Error("no pair")
	}
}
