package mds

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/tokenize"
)

// tokenDoc is sample i of a token fixture: a text, and a list of uint16
// tokens of a length that varies (1 to 700).
func tokenDoc(i int) (string, []uint16) {
	texts := []string{
		"The quick brown fox jumps over the lazy dog.",
		"Größenordnung: über 3 000 km² — naïve café.",
		"東京は日本の首都です。",
		"bad \x80 byte, truncated \xe6\x97 and overlong \xc0\xaf end",
		"",
		"🙂 emoji 👩‍💻 e\u0301",
	}
	toks := make([]uint16, (i*389)%700) // sample 0 is empty
	for j := range toks {
		toks[j] = uint16(i*131 + j*7)
	}
	return texts[i%len(texts)], toks
}

// tokenFixture is a source of shards of the columns "text" (str) and
// "input_ids" (enc: "ndarray:uint16" or "ndarray"), compressed or not.
func tokenFixture(t testing.TB, enc, compress string, shards ...int) *decodetest.Store {
	t.Helper()
	return fixture(t, compress, func(idx map[string]any, s *decodetest.Store) {
		for k := range s.Objs {
			delete(s.Objs, k)
		}
		var out []any
		i := 0
		for n, samples := range shards {
			le := binary.LittleEndian
			var body [][]byte
			for range samples {
				text, toks := tokenDoc(i)
				i++
				var arr []byte
				if enc == "ndarray" {
					arr = append(arr, 16) // uint16
				}
				arr = append(arr, 1<<2|1) // 1-D, u16 shape
				arr = le.AppendUint16(arr, uint16(len(toks)))
				for _, v := range toks {
					arr = le.AppendUint16(arr, v)
				}
				b := le.AppendUint32(nil, uint32(len(arr)))
				b = le.AppendUint32(b, uint32(len(text)))
				body = append(body, append(append(b, arr...), text...))
			}
			raw := le.AppendUint32(nil, uint32(samples))
			off := 4 + 4*(samples+1)
			for j := 0; j <= samples; j++ {
				raw = le.AppendUint32(raw, uint32(off))
				if j < samples {
					off += len(body[j])
				}
			}
			for _, b := range body {
				raw = append(raw, b...)
			}
			name := fmt.Sprintf("shard.%05d.mds", n)
			sh := map[string]any{
				"column_names": []string{"input_ids", "text"}, "column_encodings": []string{enc, "str"}, "column_sizes": []any{nil, nil},
				"compression": nil, "format": "mds", "hashes": []string{}, "samples": samples, "size_limit": 1 << 26, "version": 2,
				"raw_data": map[string]any{"basename": name, "bytes": len(raw), "hashes": map[string]any{}}, "zip_data": nil,
			}
			data := raw
			if compress == "zstd" {
				data = zstdBytes(raw)
				sh["compression"] = "zstd"
				name += ".zstd"
				sh["zip_data"] = map[string]any{"basename": name, "bytes": len(data), "hashes": map[string]any{}}
			}
			s.Objs[name] = data
			out = append(out, sh)
		}
		idx["shards"] = out
	})
}

// members decodes every chunk with the named fields and returns each
// sample's members by name.
func members(t *testing.T, s *decodetest.Store, lay *format.Layout, dec format.Decoder, names ...string) map[string][]byte {
	t.Helper()
	sel, err := format.Select(dec.Fields(), names)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(decodetest.DecodeAll(t, s, lay, dec, sel)))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name], _ = io.ReadAll(tr)
	}
}

// An ndarray column named by Options.Tokens is a token dataset: indexing
// reads each shard once, whole, and counts every sample's list from its
// header; the decoder is format.Tokens, and each .npy has the count.
func TestTokensNDArray(t *testing.T) {
	for _, enc := range []string{"ndarray:uint16", "ndarray"} {
		for _, c := range []string{"", "zstd"} {
			t.Run(enc+"/"+c, func(t *testing.T) {
				s := tokenFixture(t, enc, c, 5, 7)
				lay, dec, err := indexSource(t, s, format.Options{Tokens: "input_ids", Vocabulary: "llama2"})
				if err != nil {
					t.Fatal(err)
				}
				for k, n := range s.Read {
					if n != int64(len(s.Objs[k])) {
						t.Errorf("indexing read %d bytes of %s's %d", n, k, len(s.Objs[k]))
					}
				}
				if len(s.Read) != 3 {
					t.Errorf("indexing read %d objects; want index.json and the 2 shards", len(s.Read))
				}
				tok, ok := dec.(format.Tokens)
				if !ok {
					t.Fatalf("%T is not format.Tokens", dec)
				}
				if tok.TokenType() != "uint16" || tok.TokenField() != "input_ids" || tok.Vocabulary() != "llama2" {
					t.Fatalf("type %q field %q vocabulary %q", tok.TokenType(), tok.TokenField(), tok.Vocabulary())
				}
				got := members(t, s, lay, dec, "input_ids")
				i := 0
				for c := range lay.Chunks {
					for j, n := range tok.DocTokens(c) {
						_, toks := tokenDoc(i)
						if int(n) != len(toks) {
							t.Fatalf("sample %d: counted %d, has %d", i, n, len(toks))
						}
						want, _ := npy.AppendHeader(nil, "<u2", []int64{int64(len(toks))})
						for _, v := range toks {
							want = binary.LittleEndian.AppendUint16(want, v)
						}
						if g := got[lay.Keys[i]+".npy"]; !bytes.Equal(g, want) {
							t.Fatalf("sample %d (%d of chunk %d): .npy of %d bytes, want %d", i, j, c, len(g), len(want))
						}
						i++
					}
				}
			})
		}
	}
}

// Without Options.Tokens, indexing reads index.json alone, and the
// decoder is not a token dataset's.
func TestNoTokensIndexJSONAlone(t *testing.T) {
	s := tokenFixture(t, "ndarray:uint16", "", 5, 7)
	_, dec, err := indexSource(t, s, format.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Read) != 1 || s.Read["index.json"] != int64(len(s.Objs["index.json"])) {
		t.Fatalf("read %v", s.Read)
	}
	if _, ok := dec.(format.Tokens); ok {
		t.Fatal("a token dataset without Options.Tokens")
	}
}

// A str column named by Options.Text with a model — a SentencePiece
// model, or a Hugging Face tokenizer.json of byte-level BPE, through the
// same path: counts at index time, the field "tokens" decodes each text
// into its IDs, counted as indexed. A SentencePiece model names its EOS;
// a tokenizer.json does not (its tokenizer_config.json would), so a
// concat job over it is given eos=.
func TestTokensText(t *testing.T) {
	for _, file := range []string{"golden-unigram.model", "hf-golden-tokenizer.json"} {
		t.Run(file, func(t *testing.T) { testTokensText(t, "../../tokenize/testdata/"+file) })
	}
}

func testTokensText(t *testing.T, path string) {
	model, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tokenize.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	s := tokenFixture(t, "ndarray:uint16", "zstd", 6, 5)
	lay, dec, err := indexSource(t, s, format.Options{Text: "text", Tokenizer: model})
	if err != nil {
		t.Fatal(err)
	}
	tok := dec.(format.Tokens)
	if tok.TokenType() != "int32" || tok.TokenField() != "tokens" || tok.Vocabulary() != m.Fingerprint() {
		t.Fatalf("type %q field %q vocabulary %q", tok.TokenType(), tok.TokenField(), tok.Vocabulary())
	}
	if eos, ok := dec.(format.TokenSpecials).EOS(); ok != (m.Special().EOS >= 0) || ok && eos != m.Special().EOS {
		t.Fatalf("EOS %d %v; the model's is %d", eos, ok, m.Special().EOS)
	}
	fs := dec.Fields()
	if f := fs[len(fs)-1]; f.Name != "tokens" || f.Ext != "tokens.npy" {
		t.Fatalf("fields %+v: the tokens' member must not collide with input_ids' .npy", fs)
	}
	got := members(t, s, lay, dec, "tokens")
	i := 0
	for c := range lay.Chunks {
		for _, n := range tok.DocTokens(c) {
			text, _ := tokenDoc(i)
			ids, err := m.Encode([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			if int(n) != len(ids) {
				t.Fatalf("sample %d: counted %d, the model gives %d", i, n, len(ids))
			}
			want, _ := npy.AppendHeader(nil, "<i4", []int64{int64(len(ids))})
			for _, id := range ids {
				want = binary.LittleEndian.AppendUint32(want, uint32(id))
			}
			if g := got[lay.Keys[i]+".tokens.npy"]; !bytes.Equal(g, want) {
				t.Fatalf("sample %d: %x, want %x", i, g, want)
			}
			i++
		}
	}
	// Counts edited in the description: the decode finds another count,
	// and the chunk is damaged.
	var mt meta
	if err := json.Unmarshal(lay.Meta, &mt); err != nil {
		t.Fatal(err)
	}
	mt.Tokens.Counts[0][0]++
	b, _ := json.Marshal(mt)
	bad, err := Format{}.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := format.Select(bad.Fields(), []string{"tokens"})
	src, resident := decodetest.ReadChunk(t, s, lay, bad, 0, sel)
	if err := bad.Decode(0, sel, src, make([]byte, resident), format.WriterOptions{}); !errors.Is(err, format.ErrDamaged) {
		t.Fatalf("%v; want damage", err)
	}
}

// Columns that cannot be tokens or text are refused, naming them; so is
// a tokenizer that is not a SentencePiece model, and a document past
// Limits.DocTokens.
func TestTokensRefused(t *testing.T) {
	model, _ := os.ReadFile("../../tokenize/testdata/golden-bpe.model")
	s := tokenFixture(t, "ndarray:uint16", "", 5)
	for _, c := range []struct {
		opt  format.Options
		want string
	}{
		{format.Options{Tokens: "text"}, `column "text" is str, not a list of integers`},
		{format.Options{Text: "input_ids", Tokenizer: model}, `column "input_ids" is ndarray:uint16, not a string`},
		{format.Options{Tokens: "nope"}, `no column "nope"`},
		{format.Options{Text: "text", Tokenizer: []byte("{\"version\": \"1.0\"}")}, `not a tokenizer model: tokenizer.json: no model`},
		{format.Options{Tokens: "input_ids", Limits: format.Limits{DocTokens: 100}}, `tokens, more than 100 (Limits.DocTokens)`},
	} {
		_, _, err := indexSource(t, s, c.opt)
		if !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s%s: %v; want ErrInvalid saying %q", c.opt.Tokens, c.opt.Text, err, c.want)
		}
	}
	// A float array is not a list of tokens.
	f := fixture(t, "", func(idx map[string]any, s *decodetest.Store) {})
	var idx map[string]any
	json.Unmarshal(f.Objs["index.json"], &idx)
	for i := range 2 {
		shard(idx, i)["column_encodings"] = []string{"int", "str", "ndarray:float32"}
	}
	f.Objs["index.json"], _ = json.Marshal(idx)
	if _, _, err := indexSource(t, f, format.Options{Tokens: "vec"}); !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), "not a list of integers") {
		t.Errorf("a float32 ndarray as tokens: %v", err)
	}
}

func zstdBytes(raw []byte) []byte {
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	return enc.EncodeAll(raw, nil)
}
