package parquet

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/tokenize"
)

func str(s string) *string { return &s }

// longText is a text of n bytes that compresses well, as a conversation
// pasted a thousand times does.
func longText(n int) string {
	return strings.Repeat("the quick brown fox jumps over the lazy dog; ", n/45+1)[:n]
}

// TestTokensTextLong: `brand index --text --tokenizer` of a string
// column one of whose texts is past what the tokenizer reads is refused
// naming the row and the text's bytes, from the page's header and the
// value's length prefix: it allocates a fraction of the text, where it
// read the text whole to be refused by the tokenizer. (A ZSTD page's
// stream holds its frame's window, up to inflate.StreamWindow, more than
// this text is past the bound: TestDecodeTextsMemory holds it to a
// longer text.)
func TestTokensTextLong(t *testing.T) {
	texts := []*string{str("one"), str("two"), nil, str("four"), str("five"), str(longText(tokenize.MaxTextBytes + 1<<20)), str("seven")}
	for _, codec := range []compress.Compression{compress.Codecs.Snappy, compress.Codecs.Gzip} {
		st := newStore()
		st.put("t.parquet", textFile(t, texts, pq.WithCompression(codec)))
		model := goldenModel(t)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{Text: "text", Tokenizer: model})
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("row 5 holds a text of %d bytes", len(*texts[5]))) {
			t.Errorf("%s: %v; want row 5 refused, its bytes named", codec, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > uint64(len(*texts[5]))/2 {
			t.Errorf("%s: refusing a text of %d MiB allocated %d MiB", codec, len(*texts[5])>>20, got>>20)
		}
	}
}
