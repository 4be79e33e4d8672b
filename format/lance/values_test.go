package lance

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
)

// render is a value in the canonical JSON's form (testdata/gen/lance.cjs)
// for a field of Lance's logical type typ.
func render(typ string, b []byte, valid bool) (string, error) {
	if !valid {
		return "null", nil
	}
	var v any
	switch typ {
	case "int64":
		v = strconv.FormatInt(int64(binary.LittleEndian.Uint64(b)), 10)
	case "int32":
		v = strconv.FormatInt(int64(int32(binary.LittleEndian.Uint32(b))), 10)
	case "int8":
		v = strconv.FormatInt(int64(int8(b[0])), 10)
	case "double":
		v = fmt.Sprintf("0x%016x", binary.LittleEndian.Uint64(b))
	case "float":
		v = fmt.Sprintf("0x%08x", binary.LittleEndian.Uint32(b))
	case "string":
		v = string(b)
	case "fixed_size_binary:8", "fixed_size_binary:16":
		v = hex.EncodeToString(b)
	case "binary", "large_binary":
		sum := sha256.Sum256(b)
		v = map[string]any{"len": len(b), "sha256": hex.EncodeToString(sum[:])}
	case "bool":
		v = b[0] == 1
	case "fixed_size_list:float:8", "fixed_size_list:float:768":
		var parts []string
		for i := 0; i < len(b); i += 4 {
			parts = append(parts, fmt.Sprintf("%08x", binary.LittleEndian.Uint32(b[i:])))
		}
		v = strings.Join(parts, ",")
	case "timestamp:us:-":
		v = strconv.FormatInt(int64(binary.LittleEndian.Uint64(b)), 10)
	default:
		return "", fmt.Errorf("no canonical form for %s", typ)
	}
	out, err := json.Marshal(v)
	return string(out), err
}

// renderField is a value of the field fd of m in the canonical form: a
// packed struct's row cut into its children's values, each rendered.
func renderField(m *Manifest, fd Field, b []byte, valid bool) (string, error) {
	if fd.LogicalType != "struct" {
		return render(fd.LogicalType, b, valid)
	}
	if !valid {
		return "null", nil
	}
	obj := map[string]json.RawMessage{}
	for _, c := range m.Fields {
		if c.ParentID != fd.ID {
			continue
		}
		w := int(fixedBits(c.LogicalType) / 8)
		if w == 0 || w > len(b) {
			return "", fmt.Errorf("%s.%s: no packed form for %s in %d bytes", fd.Name, c.Name, c.LogicalType, len(b))
		}
		s, err := render(c.LogicalType, b[:w], true)
		if err != nil {
			return "", err
		}
		obj[c.Name], b = json.RawMessage(s), b[w:]
	}
	if len(b) != 0 {
		return "", fmt.Errorf("%s: %d bytes left after its children", fd.Name, len(b))
	}
	out, err := json.Marshal(obj)
	return string(out), err
}

// notYetRead are the fixtures' columns whose encodings are not read yet,
// each with what its refusal must name: the test fails when one reads
// (take it off the list) or is refused otherwise.
var notYetRead = map[string]string{}

// Every value of every column of every version of every fixture reads
// as Lance's own reader read it, each row found by its row address, or
// is refused as notYetRead says.
func TestValuesAgainstLance(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			st, objs, ms := fixture(t, name)
			ref := loadCanonical(t, name)
			refused := map[string]bool{}
			defer func() {
				for k, want := range notYetRead {
					if col, ok := strings.CutPrefix(k, name+"/"); ok && !refused[col] {
						t.Errorf("%s reads now (or is not refused for %q): take it off notYetRead", k, want)
					}
				}
			}()
			for _, m := range ms {
				rows := ref.versionOf(m.Version)
				if rows == nil {
					continue
				}
				// got[column name][row address] = the rendered value
				got := map[string]map[uint64]string{}
				wantCols := map[string]bool{}
				for _, fd := range m.Fields {
					wantCols[fd.Name] = true
				}
				for _, fr := range m.Fragments {
					for _, df := range fr.Files {
						key := "data/" + df.Path
						f, err := ReadFile(context.Background(), st, key, "", sizeOf(t, objs, key), 1<<30)
						if err != nil {
							t.Fatal(err)
						}
						for i, id := range df.Fields {
							fd := fieldByID(t, m, id)
							if df.ColumnIndices[i] < 0 {
								continue // a packed struct's child: no column of its own
							}
							vals, err := f.ReadRows(int(df.ColumnIndices[i]), 0, f.Rows, fileReader(st, key), 1<<30)
							want, refuse := notYetRead[name+"/"+fd.Name]
							if refuse && errors.Is(err, format.ErrUnsupported) && strings.Contains(err.Error(), want) {
								refused[fd.Name] = true
								delete(wantCols, fd.Name)
								continue
							}
							if err != nil {
								t.Fatal(err)
							}
							if vals.Len() != int(f.Rows) {
								t.Fatalf("%s %s: %d values of %d rows", key, fd.Name, vals.Len(), f.Rows)
							}
							if got[fd.Name] == nil {
								got[fd.Name] = map[uint64]string{}
							}
							for r := range vals.Len() {
								b, ok := vals.Value(r)
								s, err := renderField(m, fd, b, ok)
								if err != nil {
									t.Fatal(err)
								}
								got[fd.Name][fr.ID<<32|uint64(r)] = s
							}
						}
					}
				}
				for _, row := range rows {
					a := rowAddr(t, row["_rowaddr"])
					for col, want := range row {
						if col == "_rowaddr" || !wantCols[col] {
							continue
						}
						wb := wantJSON(want)
						if g := got[col][a]; g != string(wb) {
							t.Fatalf("version %d, row %d:%d, %s: got %s, Lance read %s", m.Version, a>>32, a&math.MaxUint32, col, g, wb)
						}
					}
				}
			}
		})
	}
}

// wantJSON is a canonical value as render writes it: a blob's
// description (position, size), which Lance's reader gives in place of
// its bytes, is left out, its bytes' length and SHA-256 kept.
func wantJSON(raw json.RawMessage) []byte {
	var w any
	json.Unmarshal(raw, &w)
	if m, ok := w.(map[string]any); ok {
		delete(m, "position")
		delete(m, "size")
	}
	b, _ := json.Marshal(w)
	return b
}

func fieldByID(t testing.TB, m *Manifest, id int32) Field {
	t.Helper()
	for _, f := range m.Fields {
		if f.ID == id {
			return f
		}
	}
	t.Fatalf("no field %d", id)
	return Field{}
}

// fileReader reads ranges of key through st.
func fileReader(st *dirStore, key string) RangeReader {
	return func(off, n uint64) ([]byte, error) {
		b := make([]byte, n)
		return b, st.ReadRange(context.Background(), key, "", int64(off), b)
	}
}

// Any row range reads as the same rows of the whole page, and a range
// reads only its own chunks or rows: one image of an images page costs
// the repetition index's two entries and that image's bytes, not the page.
func TestRowRanges(t *testing.T) {
	for _, name := range fixtures {
		st, objs, ms := fixture(t, name)
		m := ms[len(ms)-1]
		for _, fr := range m.Fragments {
			df := fr.Files[0]
			key := "data/" + df.Path
			f, err := ReadFile(context.Background(), st, key, "", sizeOf(t, objs, key), 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			for c := range f.Columns {
				all, err := f.ReadRows(c, 0, f.Rows, fileReader(st, key), 1<<30)
				if errors.Is(err, format.ErrUnsupported) {
					continue // TestValuesAgainstLance holds the refusals to notYetRead
				}
				if err != nil {
					t.Fatal(err)
				}
				for lo := uint64(0); lo < f.Rows; lo += 3 {
					for _, hi := range []uint64{lo, lo + 1, lo + 7, f.Rows} {
						hi = min(hi, f.Rows)
						part, err := f.ReadRows(c, lo, hi, fileReader(st, key), 1<<30)
						if err != nil {
							t.Fatal(err)
						}
						if part.Len() != int(hi-lo) {
							t.Fatalf("%s column %d rows %d to %d: %d values", key, c, lo, hi, part.Len())
						}
						for i := range part.Len() {
							g, gok := part.Value(i)
							w, wok := all.Value(int(lo) + i)
							if gok != wok || string(g) != string(w) {
								t.Fatalf("%s column %d row %d: differs read in rows %d to %d", key, c, int(lo)+i, lo, hi)
							}
						}
					}
				}
			}
		}
	}
	st, objs, ms := fixture(t, "images")
	df := ms[len(ms)-1].Fragments[0].Files[0]
	key := "data/" + df.Path
	f, err := ReadFile(context.Background(), st, key, "", sizeOf(t, objs, key), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	page := f.Columns[1].Pages[0]
	idx, err := fileReader(st, key)(page.Buffers[1].Off, page.Buffers[1].Len)
	if err != nil {
		t.Fatal(err)
	}
	w := uint64(len(idx)) / (f.Rows + 1)
	entry := func(r uint64) int64 {
		var v int64
		for j := range w {
			v |= int64(idx[r*w+j]) << (8 * j)
		}
		return v
	}
	for r := range f.Rows {
		before := st.read
		if _, err := f.ReadRows(1, r, r+1, fileReader(st, key), 1<<30); err != nil {
			t.Fatal(err)
		}
		read := st.read - before
		if want := entry(r+1) - entry(r) + 2*int64(w); read != want {
			t.Fatalf("row %d of a page of %d bytes read %d bytes, not its own %d and two index entries", r, page.Buffers[0].Len, read, want)
		}
		t.Logf("image row %d: %d bytes read of a %d-byte page", r, read, page.Buffers[0].Len)
	}
}

// One row of a mini-block page reads the chunk table (and the
// dictionary, if any) and the one chunk holding it: less than the page
// wherever the page has several chunks.
func TestMiniBlockRowReadsOneChunk(t *testing.T) {
	st, objs, ms := fixture(t, "kinds")
	df := ms[len(ms)-1].Fragments[0].Files[0]
	key := "data/" + df.Path
	f, err := ReadFile(context.Background(), st, key, "", sizeOf(t, objs, key), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for c, col := range f.Columns {
		p := col.Pages[0]
		if p.Layout.MiniBlock == nil || p.Buffers[0].Len < 4 {
			continue // one chunk: the page is the chunk
		}
		table, _ := fileReader(st, key)(p.Buffers[0].Off, p.Buffers[0].Len)
		var biggest int64
		for i := 0; i < len(table); i += 2 {
			biggest = max(biggest, (int64(binary.LittleEndian.Uint16(table[i:])>>4)+1)*8)
		}
		for _, r := range []uint64{0, f.Rows / 2, f.Rows - 1} {
			before := st.read
			if _, err := f.ReadRows(c, r, r+1, fileReader(st, key), 1<<30); err != nil {
				t.Fatal(err)
			}
			read := st.read - before
			limit := int64(p.Buffers[0].Len) + biggest
			if p.Layout.MiniBlock.Dictionary != nil {
				limit += int64(p.Buffers[2].Len) // read once a page
			}
			if read > limit || read >= limit-biggest+int64(p.Buffers[1].Len) {
				t.Fatalf("column %d row %d: %d bytes read, over the tables and one chunk (%d) or the page", c, r, read, limit)
			}
		}
	}
}
