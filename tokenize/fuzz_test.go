package tokenize

import (
	"encoding/base64"
	"errors"
	"os"
	"slices"
	"strconv"
	"testing"
)

// FuzzLoad: no bytes make Load panic, and none make it allocate more than
// loadAllocBound of their length; a model that loads encodes text with
// IDs in its vocabulary.
func FuzzLoad(f *testing.F) {
	for _, kind := range []string{"bpe", "unigram"} {
		data, err := os.ReadFile("testdata/golden-" + kind + ".model")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/3])
		// A model without its normalization map, small enough for the
		// fuzzer to mutate its pieces and specs.
		f.Add(editModel(data, func(mp *modelProto) { mp.norm.charsMap = ""; mp.pieces = mp.pieces[:min(len(mp.pieces), 300)] }))
	}
	f.Add([]byte{})
	f.Add([]byte(`{"model": {}}`))
	f.Add(smallTokenizerJSON)
	f.Add([]byte{0x0a, 0x80, 0x80, 0x80, 0x80, 0x08})
	f.Add(smallTiktoken)
	f.Add(smallTiktoken[:len(smallTiktoken)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		var m *Model
		var err error
		if got := allocated(func() { m, err = Load(data) }); got > loadAllocBound(len(data)) {
			t.Fatalf("Load of %d bytes allocated %d bytes", len(data), got)
		}
		if err != nil {
			if m != nil || !(errors.Is(err, ErrNotModel) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrUnsupported)) {
				t.Fatalf("Load = %v, %v", m, err)
			}
			return
		}
		for _, text := range []string{"", "hello world", " <|sep|> 日本語 \xff\xfe ｈｅｌｌｏ ﬁ e\u0301 😀 ", string(data[:min(len(data), 64)])} {
			ids, err := m.Encode([]byte(text))
			if errors.Is(err, ErrDamagedModel) {
				continue
			}
			if err != nil {
				t.Fatalf("Encode(%q): %v", text, err)
			}
			for _, id := range ids {
				if id < 0 || int(id) >= m.VocabSize() {
					t.Fatalf("Encode(%q) = %v: ID %d outside [0, %d)", text, ids, id, m.VocabSize())
				}
			}
		}
	})
}

// FuzzEncode: no text makes Encode panic or fail with the committed
// models, or allocate more than encodeAllocBound of its length; its IDs
// are in the vocabulary, the same every time, and Append appends exactly
// them.
func FuzzEncode(f *testing.F) {
	var models []*Model
	for _, kind := range []string{"bpe", "unigram"} {
		data, err := os.ReadFile("testdata/golden-" + kind + ".model")
		if err != nil {
			f.Fatal(err)
		}
		m, err := Load(data)
		if err != nil {
			f.Fatal(err)
		}
		models = append(models, m)
	}
	hf, err := os.ReadFile(hfGoldenTokenizer)
	if err != nil {
		f.Fatal(err)
	}
	m, err := Load(hf)
	if err != nil {
		f.Fatal(err)
	}
	models = append(models, m)
	for _, s := range edgeTexts() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		for _, m := range models {
			var ids []int32
			var err error
			if got := allocated(func() { ids, err = m.Encode(text) }); got > encodeAllocBound(len(text)) {
				t.Fatalf("%s: Encode of %d bytes allocated %d bytes", m.Algorithm(), len(text), got)
			}
			if err != nil {
				t.Fatalf("%s: Encode(%q): %v", m.Algorithm(), text, err)
			}
			for _, id := range ids {
				if id < 0 || int(id) >= m.VocabSize() {
					t.Fatalf("%s: Encode(%q) = %v: ID %d outside [0, %d)", m.Algorithm(), text, ids, id, m.VocabSize())
				}
			}
			again, _ := m.Append([]int32{-1}, text)
			if !slices.Equal(again, append([]int32{-1}, ids...)) {
				t.Fatalf("%s: Append(%q) = %v, Encode %v", m.Algorithm(), text, again, ids)
			}
		}
	})
}

// FuzzTiktokenRanks: no rank file makes the rank file's reader and the
// encoder made of it (Load's, without the check of the encoding's
// SHA-256, which no fuzzed file passes) panic, or allocate more than
// loadAllocBound of its length; text encodes to the file's ranks, each
// word as tiktoken's merging has it (tiktokenMergeReference).
func FuzzTiktokenRanks(f *testing.F) {
	f.Add(smallTiktoken)
	f.Add([]byte("IQ== 0\nIg== 1\nISI= 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var e *byteBPE
		var err error
		if got := allocated(func() {
			var ranks map[string]int32
			if ranks, _, err = parseTiktoken(data); err == nil {
				e, err = newTiktokenBPE(ranks, gpt2Pattern)
			}
		}); got > loadAllocBound(len(data)) {
			t.Fatalf("reading %d bytes allocated %d bytes", len(data), got)
		}
		if err != nil {
			if !(errors.Is(err, ErrNotModel) || errors.Is(err, ErrTooLarge)) {
				t.Fatalf("%v", err)
			}
			return
		}
		for _, text := range []string{"hello world", "ab abc  abcabc\n\n", " 日本語 \xff 😀 ", string(data[:min(len(data), 64)])} {
			ids, err := e.appendIDs(nil, []byte(text))
			if err != nil {
				t.Fatalf("Encode(%q): %v", text, err)
			}
			var want []int32
			valid := string(appendValidUTF8(nil, []byte(text)))
			for from := 0; from < len(valid); {
				a, b, _ := knownPatterns[gpt2Pattern](valid, from)
				want = append(want, tiktokenMergeReference(e.vocab, valid[a:b])...)
				from = b
			}
			if !slices.Equal(ids, want) {
				t.Fatalf("Encode(%q) = %v, tiktoken's merging %v", text, ids, want)
			}
		}
	})
}

// smallTiktoken is a rank file small enough for the fuzzer to mutate:
// the 256 bytes and a few merged tokens.
var smallTiktoken = func() []byte {
	var b []byte
	toks := byteTokens()
	toks = append(toks, "ab", "abc", " a", " ab", "  ", "\n\n", "abcabc", "bca")
	for i, tok := range toks {
		b = append(b, base64.StdEncoding.EncodeToString([]byte(tok))+" "+strconv.Itoa(i)+"\n"...)
	}
	return b
}()

// encodeAllocBound is what encoding a text of n bytes may allocate: the
// normalized text, the library's merge state (about 100 bytes a byte of
// the longest word for BPE), the IDs, and the BPE word cache's entries
// (package doc, "Costs"). Measured at most 150 times the text (a run of
// emoji, one word, BPE) over the seed corpus.
func encodeAllocBound(n int) uint64 { return 1<<20 + 512*uint64(n) }

// smallTokenizerJSON is a tokenizer.json small enough for the fuzzer to
// mutate every part of: a few tokens and merges, a normalizer, each
// pre-tokenizer step, and added tokens with every option.
var smallTokenizerJSON = []byte(`{"version":"1.0","added_tokens":[
{"id":9,"content":"<|x|>","single_word":false,"lstrip":true,"rstrip":true,"normalized":false,"special":true},
{"id":10,"content":"ab","single_word":true,"lstrip":false,"rstrip":false,"normalized":true,"special":false}],
"normalizer":{"type":"Sequence","normalizers":[{"type":"NFKC"}]},
"pre_tokenizer":{"type":"Sequence","pretokenizers":[
{"type":"Split","pattern":{"String":"-"},"behavior":"MergedWithNext","invert":true},
{"type":"Digits","individual_digits":true},
{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},
{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true}]},
"model":{"type":"BPE","unk_token":"a","fuse_unk":true,"ignore_merges":true,"vocab":{"a":0,"b":1,"Ġ":2,"ab":3,"Ġa":4,"Ġab":5,"c":6},
"merges":[["a","b"],["Ġ","a"],["Ġa","b"]]}}`)
