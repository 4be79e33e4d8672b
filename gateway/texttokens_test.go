package gateway_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/testsupport/nodetest"
	"github.com/brandgw/brand/tokenize"
)

// A Parquet text column indexed with a Hugging Face tokenizer.json
// (byte-level BPE; package tokenize's committed Llama-3-style file) and
// served as a token job over HTTP: the documents are the texts of
// tokenize/testdata/hf-golden.json, so the sequences of an epoch of
// seq=64&pack=concat, cut at each EOS, are the reference's IDs of those
// texts (Hugging Face tokenizers', recorded there), each once. The
// tokenizer adds no BOS or EOS to a document, as a SentencePiece model
// adds none; a tokenizer.json names no EOS (its tokenizer_config.json
// would), so pack=concat without eos= is a 400 saying to give it.
func TestByteLevelTextTokensOverHTTP(t *testing.T) {
	const path = "../tokenize/testdata/hf-golden-tokenizer.json"
	model, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tokenize.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	eos, err := m.Encode([]byte("<|end_of_text|>"))
	if err != nil || len(eos) != 1 {
		t.Fatalf("<|end_of_text|>: %v %v", eos, err)
	}
	raw, err := os.ReadFile("../tokenize/testdata/hf-golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []struct {
			Hex string  `json:"hex"`
			IDs []int32 `json:"ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	var texts [][]byte
	var ref [][]int32
	for _, c := range golden.Cases {
		if slices.Contains(c.IDs, eos[0]) {
			continue // a document holding the separator
		}
		b, err := hex.DecodeString(c.Hex)
		if err != nil {
			t.Fatal(err)
		}
		texts, ref = append(texts, b), append(ref, c.IDs)
	}

	srv := serveTextTokens(t, model, texts)
	resp, body := get(t, srv.URL+"/epoch/0/batch/0?seq=64&pack=concat")
	if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("give eos=ID")) {
		t.Fatalf("pack=concat without eos=: %s %s, want 400 saying to give eos=", resp.Status, body)
	}
	checkConcatEpoch(t, srv.URL, fmt.Sprintf("seq=64&pack=concat&eos=%d&batch_size=4", eos[0]), eos[0], ref)
}

// A Parquet text column indexed with tiktoken's cl100k_base (its rank
// file, as tiktoken publishes it, from the reference's package) and
// served as a token job over HTTP: the sequences of an epoch of
// seq=64&pack=concat, cut at each EOS, are tiktoken's IDs of the texts
// (encode_ordinary), each once. The encoding names <|endoftext|>, so
// pack=concat needs no eos=.
func TestTiktokenTextTokensOverHTTP(t *testing.T) {
	dir := t.TempDir()
	texts := [][]byte{[]byte("Hello, world! I'm here."), []byte("日本語のテキスト、中文文本。"), []byte("func main() {\n\tfmt.Println(42)\n}\n"),
		[]byte("Привет, как дела?  "), []byte("emoji 👩‍👩‍👧‍👦 and \xff bytes"), []byte("<|endoftext|> spelled in a text is text"),
		[]byte("1234567 numbers, 3.14159"), []byte("\n\n  whitespace\t\truns   ")}
	for i := range 40 {
		texts = append(texts, fmt.Appendf(nil, "document %d: the quick brown fox jumps over the lazy dog %d times.", i, i*i))
	}
	ref := nodetest.EncodeTiktoken(t, dir, []string{"cl100k_base"}, texts)["cl100k_base"]
	model, err := os.ReadFile(filepath.Join(dir, "cl100k_base.tiktoken"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := tokenize.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	eos := m.Special().EOS
	if eos != 100257 {
		t.Fatalf("EOS = %d, want <|endoftext|> (100257)", eos)
	}
	srv := serveTextTokens(t, model, texts)
	checkConcatEpoch(t, srv.URL, "seq=64&pack=concat&batch_size=4", eos, ref)
}

// serveTextTokens writes texts as a Parquet text column, indexes it in
// place with the tokenizer file model, and starts a gateway over it.
func serveTextTokens(t *testing.T, model []byte, texts [][]byte) *httptest.Server {
	t.Helper()
	strs := make([]string, len(texts))
	for i, x := range texts {
		strs[i] = string(x)
	}
	st := textTokenStore(t, model, strs)
	_, srv := start(t, st, func(c *gateway.Config) { c.Datasets[0].Formats = []format.Format{parquet.Format{}} })
	return srv
}

// checkConcatEpoch reads an epoch of a pack=concat token job (query)
// and requires its sequences, cut at each eos, to be the documents ref,
// each once.
func checkConcatEpoch(t *testing.T, url, query string, eos int32, ref [][]int32) {
	t.Helper()
	var stream []int32
	for _, sq := range tokenEpoch(t, url, query, 0) {
		if len(sq.ids) != 64 {
			t.Fatalf("sequence %s of %d tokens", sq.key, len(sq.ids))
		}
		stream = append(stream, sq.ids...)
	}
	last := len(stream) - 1
	for last >= 0 && stream[last] != eos {
		last--
	}
	if tail := stream[last+1:]; len(tail) >= 64 || slices.ContainsFunc(tail, func(id int32) bool { return id != 0 }) {
		t.Fatalf("after the epoch's last EOS: %v, want fewer than 64 pads (0)", tail)
	}
	var docs, want []string
	for doc := range bytes.SplitSeq(int32s(stream[:last]), int32s([]int32{eos})) {
		docs = append(docs, string(doc))
	}
	for _, ids := range ref {
		want = append(want, string(int32s(ids)))
	}
	slices.Sort(docs)
	slices.Sort(want)
	if !slices.Equal(docs, want) {
		t.Fatalf("the epoch's %d documents are not the reference's %d, each once", len(docs), len(want))
	}
}

func int32s(ids []int32) []byte {
	b := make([]byte, 4*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(id))
	}
	return b
}
