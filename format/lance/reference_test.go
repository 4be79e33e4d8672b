package lance

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// canonical is testdata/NAME.json: every version's rows as Lance's own
// reader read them (testdata/gen/lance.cjs), each row's values by column
// name and its row address under "_rowaddr".
type canonical struct {
	Versions []struct {
		Version uint64                       `json:"version"`
		Rows    []map[string]json.RawMessage `json:"rows"`
	} `json:"versions"`
}

// loadCanonical reads testdata/NAME.json, or NAME.json.gz: the large
// fixtures' JSON holds their latest version only, gzipped.
func loadCanonical(t testing.TB, name string) canonical {
	t.Helper()
	return loadCanonicalFrom(t, "testdata", name)
}

func loadCanonicalFrom(t testing.TB, dir, name string) canonical {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		b, err = readGzip(filepath.Join(dir, name+".json.gz"))
	}
	if err != nil {
		t.Fatal(err)
	}
	var c canonical
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func rowAddr(t testing.TB, raw json.RawMessage) uint64 {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func readGzip(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(z)
}

// versionOf is the canonical JSON's version v, or nil where it holds
// only later ones.
func (c canonical) versionOf(v uint64) []map[string]json.RawMessage {
	for _, cv := range c.Versions {
		if cv.Version == v {
			return cv.Rows
		}
	}
	return nil
}

var fixtures = []string{"basic", "v1names", "images", "kinds", "bigdel", "emb768", "longtext", "blob", "packed", "fsb"}

// Every fixture's versions are the versions Lance's reader listed, each
// manifest's fragments hold exactly the rows it read (row address =
// fragment id << 32 | offset, deleted rows counted by the deletion
// file), and every data file's metadata parses with its row count the
// fragment's.
func TestManifestsAgainstLance(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			st, objs, ms := fixture(t, name)
			ref := loadCanonical(t, name)
			if last := ref.Versions[len(ref.Versions)-1].Version; ms[len(ms)-1].Version != last {
				t.Fatalf("latest version %d, Lance's %d", ms[len(ms)-1].Version, last)
			}
			for _, m := range ms {
				rows := ref.versionOf(m.Version)
				if rows == nil {
					continue
				}
				if m.DataFormat != "lance" || m.DataVersion != "2.1" || m.Writer != "lance" {
					t.Fatalf("version %d: data format %s %s, writer %s", m.Version, m.DataFormat, m.DataVersion, m.Writer)
				}
				live := map[uint64]uint64{} // fragment id: rows Lance read
				for _, row := range rows {
					a := rowAddr(t, row["_rowaddr"])
					live[a>>32]++
				}
				var total uint64
				for _, fr := range m.Fragments {
					rows := fr.PhysicalRows
					if fr.Deletion != nil {
						if _, err := os.Stat(filepath.Join(st.root, fr.Deletion.Path(fr.ID))); err != nil {
							t.Fatalf("fragment %d's deletion file: %v", fr.ID, err)
						}
						rows -= fr.Deletion.NumDeleted
					}
					if live[fr.ID] != rows {
						t.Fatalf("version %d, fragment %d: %d rows live, Lance read %d", m.Version, fr.ID, rows, live[fr.ID])
					}
					total += rows
					for _, df := range fr.Files {
						key := "data/" + df.Path
						size := sizeOf(t, objs, key)
						if df.Size != 0 && int64(df.Size) != size {
							t.Fatalf("%s: %d bytes, the manifest says %d", key, size, df.Size)
						}
						f, err := ReadFile(context.Background(), st, key, "", size, 1<<30)
						if err != nil {
							t.Fatal(err)
						}
						if f.Rows != fr.PhysicalRows || len(f.Columns) != len(df.ColumnIndices) || len(f.Schema) != len(m.Fields) {
							t.Fatalf("%s: %d rows, %d columns, %d fields; fragment of %d rows, %d columns, %d fields", key, f.Rows, len(f.Columns), len(f.Schema), fr.PhysicalRows, len(df.ColumnIndices), len(m.Fields))
						}
					}
				}
				if total != uint64(len(rows)) {
					t.Fatalf("version %d: %d rows, Lance read %d", m.Version, total, len(rows))
				}
			}
		})
	}
}

// Each deletion file names exactly the rows of its fragment Lance's
// reader left out.
func TestDeletionsAgainstLance(t *testing.T) {
	for _, name := range fixtures {
		st, objs, ms := fixture(t, name)
		ref := loadCanonical(t, name)
		for _, m := range ms {
			rows := ref.versionOf(m.Version)
			if rows == nil {
				continue
			}
			live := map[uint64]bool{}
			for _, row := range rows {
				live[rowAddr(t, row["_rowaddr"])] = true
			}
			for i := range m.Fragments {
				fr := &m.Fragments[i]
				var key string
				var size int64
				if fr.Deletion != nil {
					key = fr.Deletion.Path(fr.ID)
					size = sizeOf(t, objs, key)
				}
				dels, err := ReadDeletions(context.Background(), st, fr, key, "", size, 1<<30)
				if err != nil {
					t.Fatal(err)
				}
				deleted := map[uint64]bool{}
				for _, o := range dels {
					deleted[uint64(o)] = true
				}
				for o := range fr.PhysicalRows {
					if live[fr.ID<<32|o] == deleted[o] {
						t.Fatalf("%s version %d, row %d:%d: live %v, deleted %v", name, m.Version, fr.ID, o, live[fr.ID<<32|o], deleted[o])
					}
				}
			}
		}
	}
}
