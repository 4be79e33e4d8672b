package parquet

import (
	"context"
	"fmt"
	"strings"
	"testing"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/format"
)

// TestDecodeUnread is issue 80, case 3's gateway half: a chunk whose
// statistics say a text past the bound (LongTexts) decodes with each
// sample holding one written unread, naming the field, its bytes and the
// bound, the value never read — every other sample as Decode writes it —
// read with every field and with a selection holding a text field; a
// chunk whose texts are within the bound says so before it is read.
func TestDecodeUnread(t *testing.T) {
	const most = 2000
	groups := [][]textRow{
		{
			{caption: str("a cat"), turns: []string{"<image> what is it?", "a cat"}},
			{caption: str(longText(most + 100)), turns: []string{"<image> x", "y"}},
			{caption: str(longText(most)), turns: []string{"<image> at the bound", "kept"}},
			{caption: str("a bird"), turns: []string{"<image> " + longText(most+1), "a bird"}},
		},
		{
			{caption: str("a hen"), turns: []string{"<image> " + longText(most+10), longText(most + 300)}},
			{caption: nil, turns: []string{"<image> no caption", "none"}},
		},
	}
	for _, codec := range []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy, compress.Codecs.Zstd} {
		for _, dict := range []bool{true, false} {
			for _, fields := range [][]string{nil, {"caption", "image"}} {
				t.Run(fmt.Sprintf("%s/dict=%v/fields=%v", codec, dict, fields), func(t *testing.T) {
					props := pq.NewWriterProperties(pq.WithCompression(codec), pq.WithDictionaryDefault(dict), pq.WithDataPageSize(1<<10))
					st := textStore(t, props, groups...)
					whole, lay, dec := decodeAll(t, st, format.Options{}, fields...)
					sel, err := format.Select(dec.Fields(), fields)
					if err != nil {
						t.Fatal(err)
					}
					tb := dec.(format.TextBound)
					if _, may := tb.LongTexts(0, sel, 1<<20); may {
						t.Error("LongTexts: a chunk within the bound may hold a longer text")
					}
					working, may := tb.LongTexts(0, sel, most)
					if w := dec.(format.Working).Working(0, sel); !may || working <= w {
						t.Fatalf("LongTexts: %d, %v; want true and more than Decode's working (%d)", working, may, w)
					}
					ranges, bound := dec.Extent(0, sel)
					var src []byte
					for _, r := range ranges {
						p := make([]byte, r.Len)
						if err := st.ReadRange(context.Background(), lay.Chunks[0].Object, lay.Chunks[0].ETag, r.Off, p); err != nil {
							t.Fatal(err)
						}
						src = append(src, p...)
					}
					dst := make([]byte, bound)
					if err := tb.DecodeUnread(0, sel, src, dst, most, format.WriterOptions{ModTime: 1700000000}); err != nil {
						t.Fatal(err)
					}
					tab, err := format.Verify(dst)
					if err != nil {
						t.Fatal(err)
					}
					want := map[int]string{1: "field caption holds a text of 2100 bytes"}
					if fields == nil {
						want[3] = "field conversations holds a text of 2009 bytes"
						want[4] = "field conversations holds a text of 2300 bytes"
					}
					got := residentSamples(t, dst)
					for i, k := range lay.Keys {
						off, n, _ := tab.Sample(i)
						why, unread := format.SampleUnread(dst[off : off+n])
						switch {
						case want[i] == "" && unread:
							t.Errorf("sample %s written unread: %s", k, why)
						case want[i] == "" && got[i] != render(whole[k]):
							t.Errorf("sample %s:\n%s\nwant (Decode's):\n%s", k, got[i], render(whole[k]))
						case want[i] != "" && (!unread || !strings.HasPrefix(why, want[i]) || !strings.Contains(why, "more than the 2000 a text may be")):
							t.Errorf("sample %s: unread %v (%q), want it unread saying %q", k, unread, why, want[i])
						case want[i] != "" && strings.Contains(string(dst[off:off+n]), longText(most)):
							t.Errorf("sample %s written unread holds its text", k)
						}
					}
				})
			}
		}
	}
}
