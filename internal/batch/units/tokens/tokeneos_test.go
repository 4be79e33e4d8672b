package tokens_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	utok "github.com/brandgw/brand/internal/batch/units/tokens"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/parquet"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/tokenize"
)

// textTokens is a Parquet text column indexed in place tokenized with
// the model in file model of package tokenize's testdata, loaded and
// viewed as a token job reads it.
func textTokens(t *testing.T, model string) (*catalog.Dataset, []byte) {
	t.Helper()
	ctx := context.Background()
	tok, err := os.ReadFile("../../../../tokenize/testdata/" + model)
	if err != nil {
		t.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	for _, s := range []string{"a first text", "and a second, longer one", "the third"} {
		b.Field(0).(*array.StringBuilder).Append(s)
	}
	rec := b.NewRecordBatch()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	b.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "data/train-0.parquet", bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
		t.Fatal(err)
	}
	formats := []format.Format{parquet.Format{}}
	if _, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: formats, Options: format.Options{Text: "text", Tokenizer: tok}}); err != nil {
		t.Fatal(err)
	}
	ds, err := catalog.Load(ctx, catalog.Spec{Name: "txt", URL: "file:///txt", Store: st, Formats: formats}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if ds, err = utok.TokenView(ds); err != nil {
		t.Fatal(err)
	}
	return ds, tok
}

// TestConcatTakesTheModelsEOS: pack=concat without eos= over a text
// column tokenized at index time puts the tokenizer's own EOS after each
// document where the model names one (a SentencePiece model's, as
// tiktoken's encodings name <|endoftext|>: package tokenize's tests), and
// is refused saying to give eos= where it names none (a tokenizer.json);
// eos= given is taken over either.
func TestConcatTakesTheModelsEOS(t *testing.T) {
	for _, tc := range []struct {
		model, eos string
		want       int32 // -1: refused
	}{
		{"golden-bpe.model", "", -2}, // the model's
		{"golden-bpe.model", "&eos=7", 7},
		{"hf-golden-tokenizer.json", "", -1},
		{"hf-golden-tokenizer.json", "&eos=7", 7},
	} {
		ds, tok := textTokens(t, tc.model)
		want := tc.want
		if want == -2 {
			m, err := tokenize.Load(tok)
			if err != nil {
				t.Fatal(err)
			}
			if want = m.Special().EOS; want < 0 {
				t.Fatalf("%s names no EOS", tc.model)
			}
		}
		spec, err := utok.TokensOf(ds, unitstest.TokenJob(t, "seq=64&pack=concat"+tc.eos))
		switch {
		case want == -1 && (!errors.Is(err, utok.ErrTokens) || !strings.Contains(err.Error(), "give eos=")):
			t.Errorf("%s%s: %v; want ErrTokens saying to give eos=", tc.model, tc.eos, err)
		case want >= 0 && (err != nil || spec.EOS != want):
			t.Errorf("%s%s: EOS %d, %v; want %d", tc.model, tc.eos, spec.EOS, err, want)
		}
	}
}
