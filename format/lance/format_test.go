package lance

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
)

// columns reads every field of the latest version of a fixture with
// Dataset.Column (held to Lance's reader by reference_test.go): field →
// row address → value, nil where null.
func columns(t *testing.T, st format.Store, objs []format.Object, fields []format.Field) (map[string]map[uint64][]byte, []uint64) {
	t.Helper()
	ds, err := Open(context.Background(), st, objs, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[uint64][]byte{}
	var addrs []uint64
	for _, f := range fields {
		vals, as, err := ds.Column(context.Background(), f.Name)
		if err != nil {
			t.Fatal(err)
		}
		m := map[uint64][]byte{}
		for i, a := range as {
			if v, ok := vals.Value(i); ok {
				m[a] = append([]byte{}, v...)
			}
		}
		out[f.Name], addrs = m, as
	}
	return out, addrs
}

// members parses a decoded chunk's resident form: sample key → ext →
// bytes, in the chunk's order.
func members(t *testing.T, b []byte) ([]string, map[string]map[string][]byte) {
	t.Helper()
	tab, err := format.Verify(b)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	out := map[string]map[string][]byte{}
	for i := range tab.Len() {
		off, n, _ := tab.Sample(i)
		tr := tar.NewReader(bytes.NewReader(b[off : off+n]))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			key, ext, _ := strings.Cut(h.Name, ".")
			if out[key] == nil {
				keys = append(keys, key)
				out[key] = map[string][]byte{}
			}
			out[key][ext], _ = io.ReadAll(tr)
		}
	}
	return keys, out
}

// TestFormatAgainstColumn: the format indexes a fixture's latest version
// into chunks (several a file at a small chunk size), and decoding every
// chunk from its extent's bytes alone gives each live row once, keyed by
// its row address, each column's value as Dataset.Column reads it (a
// null no member, an all-null row one empty .null), within the bound
// (or a GrowError naming what a guessed bound lacked), and a selection
// of one column reads only that column's pages.
func TestFormatAgainstColumn(t *testing.T) {
	for _, name := range []string{"basic", "images", "kinds", "longtext", "emb768", "fsb", "bigdel", "v1names"} {
		t.Run(name, func(t *testing.T) {
			st, objs, _ := fixture(t, name)
			if !(Format{}).Detect(objs) {
				t.Fatal("not detected")
			}
			lay, err := Format{}.Index(context.Background(), st, objs, format.Options{ChunkBytes: 4 << 10})
			if err != nil {
				t.Fatal(err)
			}
			dec, err := Format{}.Open(lay.Meta)
			if err != nil {
				t.Fatal(err)
			}
			want, addrs := columns(t, st, objs, dec.Fields())
			if len(lay.Keys) != len(addrs) {
				t.Fatalf("%d keys, %d live rows", len(lay.Keys), len(addrs))
			}
			seen := map[string]bool{}
			at := 0
			for c, ch := range lay.Chunks {
				sels := []format.Selection{nil}
				for i := range dec.Fields() {
					sels = append(sels, format.Selection{i})
				}
				for _, sel := range sels {
					rs, bound := dec.Extent(c, sel)
					var src []byte
					for _, r := range rs {
						if r.End() > ch.Size {
							t.Fatalf("chunk %d: range %v past %d", c, r, ch.Size)
						}
						b := make([]byte, r.Len)
						if err := st.ReadRange(context.Background(), ch.Object, "", r.Off, b); err != nil {
							t.Fatal(err)
						}
						src = append(src, b...)
					}
					if w := dec.(format.Working).Working(c, sel); w < bound {
						t.Fatalf("chunk %d: working %d, under the bound %d", c, w, bound)
					}
					dst := make([]byte, bound)
					err := dec.Decode(c, sel, src, dst, format.WriterOptions{})
					var g *format.GrowError
					if errors.As(err, &g) {
						if !dec.(*datasetDecoder).guessed(c, sel) {
							t.Fatalf("chunk %d: a bound of %d bytes from fixed widths, %d needed", c, bound, g.Need)
						}
						dst = make([]byte, g.Need)
						err = dec.Decode(c, sel, src, dst, format.WriterOptions{MayGrow: true})
					}
					if err != nil {
						t.Fatalf("chunk %d: %v", c, err)
					}
					keys, ms := members(t, dst)
					if len(keys) != ch.Samples {
						t.Fatalf("chunk %d: %d samples, %d indexed", c, len(keys), ch.Samples)
					}
					for i, k := range keys {
						if k != lay.Keys[at+i] {
							t.Fatalf("chunk %d sample %d: key %s, indexed %s", c, i, k, lay.Keys[at+i])
						}
						a, _ := strconv.ParseUint(k, 10, 64)
						n := 0
						for fi, f := range dec.Fields() {
							if !sel.Has(fi) {
								continue
							}
							v, ok := want[f.Name][a]
							got, has := ms[k][f.Ext]
							if ok != has || !bytes.Equal(v, got) {
								t.Fatalf("row %d column %s: %d bytes (%v), want %d (%v)", a, f.Name, len(got), has, len(v), ok)
							}
							if ok {
								n++
							}
						}
						if _, null := ms[k][nullExt]; null != (n == 0) || len(ms[k]) != max(n, 1) {
							t.Fatalf("row %d: members %d, %d valid", a, len(ms[k]), n)
						}
						if sel == nil {
							if seen[k] {
								t.Fatalf("row %d twice", a)
							}
							seen[k] = true
						}
					}
				}
				at += ch.Samples
			}
			if len(seen) != len(addrs) {
				t.Fatalf("%d rows decoded, %d live", len(seen), len(addrs))
			}
			// Images stored as zstd per value are measured at index: a chunk
			// reading only them is bounded exactly, never guessed.
			if name == "images" {
				img := slices.IndexFunc(dec.Fields(), func(f format.Field) bool { return f.Name == "image" })
				for c := range lay.Chunks {
					if dec.(*datasetDecoder).guessed(c, format.Selection{img}) {
						t.Errorf("chunk %d: the image column's bound guessed, not measured", c)
					}
				}
			}
			t.Logf("%d chunks, %d samples", len(lay.Chunks), len(lay.Keys))
		})
	}
}

// TestFormatRefuses: what the format does not index yet is refused by
// name, never read as wrong bytes.
func TestFormatRefuses(t *testing.T) {
	for name, says := range map[string]string{"blob": "blob column", "packed": "nested"} {
		st, objs, _ := fixture(t, name)
		_, err := Format{}.Index(context.Background(), st, objs, format.Options{})
		if !errors.Is(err, format.ErrUnsupported) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want ErrUnsupported saying %q", name, err, says)
		}
	}
}
