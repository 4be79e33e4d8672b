package parquet

import (
	"fmt"
	"github.com/brandgw/brand/internal/testsupport/nodetest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
)

// duckdbFixtures writes testdata/duckdb.cjs's fixtures into a temporary
// directory with DuckDB (scripts/ensure-duckdb.sh installs it), or skips —
// failing with CI=true, so a CI run cannot pass by skipping.
func duckdbFixtures(t *testing.T) string {
	t.Helper()
	node, mods := nodetest.Find(t, nodetest.DuckDB)
	dir := t.TempDir()
	cmd := exec.Command(node, "testdata/duckdb.cjs", dir)
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node testdata/duckdb.cjs: %v\n%s", err, b)
	}
	return dir
}

func storeOf(t *testing.T, dir string, names ...string) *memStore {
	st := newStore()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		st.put(n, b)
	}
	return st
}

// Parquet written by DuckDB — the Hub's image layout, and a column of
// every kind in every codec DuckDB writes (its lz4 is LZ4_RAW), with data
// pages v1 and v2 — decodes row by row to what duckdb.cjs wrote.
func TestDuckDB(t *testing.T) {
	dir := duckdbFixtures(t)
	t.Run("images", func(t *testing.T) {
		got, lay, _ := decodeAll(t, storeOf(t, dir, "images.parquet"), format.Options{})
		if len(lay.Keys) != 250 {
			t.Fatalf("%d rows", len(lay.Keys))
		}
		for i := range 250 {
			var w strings.Builder
			if i%17 != 5 {
				img := "\x89PNG\r\n\x1a\n"
				ext := "png"
				if i%2 == 0 {
					img, ext = "\xff\xd8\xff\xe0", "jpg"
				}
				img += strings.Repeat(string([]byte{byte(i % 256)}), 100+i%50)
				fmt.Fprintf(&w, "%s=%q\n", ext, img)
			}
			if i%13 != 4 {
				fmt.Fprintf(&w, "cls=%q\n", fmt.Sprint(i%1000))
			}
			if w.Len() == 0 {
				w.WriteString("null=\"\"\n")
			}
			if g := render(got[fmt.Sprintf("images/%03d", i)]); g != w.String() {
				t.Fatalf("row %d:\n got %.300s\nwant %.300s", i, g, w.String())
			}
		}
	})
	for _, codec := range []string{"uncompressed", "snappy", "gzip", "zstd", "lz4", "brotli"} {
		for _, v := range []string{"V1", "V2"} {
			name := fmt.Sprintf("mixed-%s-%s", codec, v)
			t.Run(name, func(t *testing.T) {
				got, lay, dec := decodeAll(t, storeOf(t, dir, name+".parquet"), format.Options{})
				if g := len(ds0(t, lay).chunks); g < 2 {
					t.Fatalf("%d row groups", g)
				}
				exts := map[string]string{}
				for _, f := range dec.Fields() {
					exts[f.Name] = f.Ext
				}
				if exts["text"] != "text.txt" || exts["kind"] != "kind.txt" || exts["input_ids"] != "npy" || exts["label"] != "cls" {
					t.Fatalf("fields %+v", dec.Fields())
				}
				for i := range 5000 {
					if g, w := render(got[fmt.Sprintf("%s/%04d", name, i)]), wantMixedDuckDB(i); g != w {
						t.Fatalf("row %d:\n got %s\nwant %s", i, g, w)
					}
				}
			})
		}
	}
}

func wantMixedDuckDB(i int) string {
	var w strings.Builder
	if i%11 != 3 {
		fmt.Fprintf(&w, "cls=%q\n", fmt.Sprint(i%7-3))
	}
	if i%9 != 2 {
		fmt.Fprintf(&w, "text.txt=%q\n", strings.Repeat("ab", i%5)+fmt.Sprint(i))
	}
	switch i % 6 {
	case 1:
	case 2:
		fmt.Fprintf(&w, "npy=%q\n", npyOf("<i4", 4, nil))
	default:
		var vals []int64
		for j := range i%40 + 1 {
			vals = append(vals, int64((i*31+j*7)%50000-100))
		}
		fmt.Fprintf(&w, "npy=%q\n", npyOf("<i4", 4, vals))
	}
	if i%8 != 0 {
		fmt.Fprintf(&w, "score.json=%q\n", fmt.Sprint(float64(i)/4))
	}
	if i%10 != 7 {
		tags := []string{"null", "[]", fmt.Sprintf(`["a",null,"%d"]`, i)}[i%3]
		fmt.Fprintf(&w, "meta.json=%q\n", fmt.Sprintf(`{"id":%d,"tags":%s}`, int64(i)*8589934592, tags))
	}
	if i%4 != 1 {
		fmt.Fprintf(&w, "kind.txt=%q\n", fmt.Sprint(i%3))
	}
	if w.Len() == 0 {
		return "null=\"\"\n"
	}
	return w.String()
}

// DuckDB's token lists (input_ids list<int32>: null, empty, or i%40+1
// elements) counted from their levels alone, in every codec DuckDB
// writes and both page versions, are each row's length, and the decoded
// .npy members have it.
func TestDuckDBTokens(t *testing.T) {
	dir := duckdbFixtures(t)
	for _, codec := range []string{"uncompressed", "snappy", "gzip", "zstd", "lz4", "brotli"} {
		for _, v := range []string{"V1", "V2"} {
			name := fmt.Sprintf("mixed-%s-%s", codec, v)
			t.Run(name, func(t *testing.T) {
				st := storeOf(t, dir, name+".parquet")
				got, lay, dec := decodeAll(t, st, format.Options{Tokens: "input_ids"}, "input_ids")
				tok := dec.(format.Tokens)
				i := 0
				for c := range lay.Chunks {
					for _, n := range tok.DocTokens(c) {
						want := i%40 + 1
						if i%6 == 1 || i%6 == 2 {
							want = 0
						}
						if int(n) != want {
							t.Fatalf("row %d: counted %d tokens, has %d", i, n, want)
						}
						if m := got[fmt.Sprintf("%s/%04d", name, i)]; want > 0 && len(m[0].data) != npyHeaderMax+4*want {
							t.Fatalf("row %d: .npy of %d bytes", i, len(m[0].data))
						}
						i++
					}
				}
				if i != 5000 {
					t.Fatalf("%d rows", i)
				}
			})
		}
	}
}
