package parquet

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/brandgw/brand/format"
)

// TestImageText: a dataset's rows are image-text samples when one
// column becomes their image member (.jpg, .png) and one their text
// (.txt) or conversation (.json); otherwise ErrNotImageText names the
// columns and how to choose them (--members).
func TestImageText(t *testing.T) {
	turn := arrow.StructOf(arrow.Field{Name: "from", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "value", Type: arrow.BinaryTypes.String})
	bin, str, conv := arrow.BinaryTypes.Binary, arrow.BinaryTypes.String, arrow.ListOf(turn)
	f := func(name string, ty arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: ty, Nullable: true}
	}
	tests := []struct {
		name    string
		fields  []arrow.Field
		members map[string]string
		want    []string // words of the error; none: image-text samples
	}{
		{"caption", []arrow.Field{f("image", bin), f("caption", str)}, nil, nil},
		{"conversation", []arrow.Field{f("image", bin), f("conversations", conv), f("id", arrow.PrimitiveTypes.Int64)}, nil, nil},
		{"no image", []arrow.Field{f("caption", str), f("label", arrow.PrimitiveTypes.Int64)}, nil, []string{"no image column", "caption (string", "label (int64"}},
		{"no text", []arrow.Field{f("image", bin), f("label", arrow.PrimitiveTypes.Int64)}, nil, []string{"no text or conversation column", "image (binary (image)"}},
		{"two images", []arrow.Field{f("image", bin), f("mask", bin), f("caption", str)}, nil, []string{"image columns image", "mask", "--members COLUMN=jpg"}},
		{"two images, one chosen", []arrow.Field{f("image", bin), f("mask", bin), f("caption", str)}, map[string]string{"image": "jpg"}, nil},
		{"two captions", []arrow.Field{f("image", bin), f("caption", str), f("url", str)}, nil, []string{"no text or conversation column", "--members COLUMN=txt"}},
		{"two captions, one chosen", []arrow.Field{f("image", bin), f("caption", str), f("url", str)}, map[string]string{"caption": "txt"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := arrow.NewSchema(tt.fields, nil)
			st := newStore()
			st.put("d/part-0.parquet", writeArrow(t, sc, nil, newRecord(sc, func(b *array.RecordBuilder) {
				for _, fb := range b.Fields() {
					fb.AppendNull()
				}
			})))
			lay, err := Format{}.Index(context.Background(), st, st.listing(), format.Options{Members: tt.members})
			if err != nil {
				t.Fatal(err)
			}
			dec, err := Format{}.Open(lay.Meta)
			if err != nil {
				t.Fatal(err)
			}
			err = format.CheckImageText("parquet", dec)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				// An image column left to its values' extensions gives
				// unread ones; a column --members sets gives its own.
				it := dec.(format.ImageText)
				unread := tt.members["image"] == ""
				if it.UnreadImage("bin") != unread || it.UnreadImage("webp") != unread || it.UnreadImage("png") || it.UnreadImage("txt") {
					t.Fatalf("UnreadImage: bin %v, webp %v, png %v, txt %v; want %v, %v, false, false",
						it.UnreadImage("bin"), it.UnreadImage("webp"), it.UnreadImage("png"), it.UnreadImage("txt"), unread, unread)
				}
				return
			}
			if !errors.Is(err, format.ErrNotImageText) {
				t.Fatalf("%v; want ErrNotImageText", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v; want it to say %q", err, w)
				}
			}
		})
	}
}
