package lance

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/brandgw/brand/format"
)

// smallImages is the images fixture's second fragment's data file (3
// rows, a full-zip column of zstd values) and its key.
func smallImages(t *testing.T) (string, []byte) {
	t.Helper()
	_, _, ms := fixture(t, "images")
	key := "data/" + ms[len(ms)-1].Fragments[1].Files[0].Path
	b, err := os.ReadFile(filepath.Join("testdata", "images.lance", key))
	if err != nil {
		t.Fatal(err)
	}
	return key, b
}

// readAll reads every row of every column of the file b.
func readAll(name string, b []byte, limit int64) error {
	f, _, err := ParseFile(name, int64(len(b)), b)
	if err != nil {
		return err
	}
	read := func(off, n uint64) ([]byte, error) { return b[off : off+n], nil }
	for c := range f.Columns {
		if _, err := f.ReadRows(c, 0, f.Rows, read, limit); err != nil {
			return err
		}
	}
	return nil
}

// Hostile data files are refused with an error naming the file, wrapping
// format.ErrInvalid, before anything is allocated for what they declare.
func TestHostileFiles(t *testing.T) {
	key, orig := smallImages(t)
	size := len(orig)
	foot := size - footerLen
	gbo := int(binary.LittleEndian.Uint64(orig[foot+16:]))
	cmo := int(binary.LittleEndian.Uint64(orig[foot+8:]))
	u64 := func(at int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint64(b[at:], v); return b }
	}
	u32 := func(at int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint32(b[at:], v); return b }
	}
	// The image column's first row: a control word, its size (u32), the
	// zstd value's decoded length (u64), the frame.
	imgData := int(readFile(t, key, orig).Columns[1].Pages[0].Buffers[0].Off)
	tests := []struct {
		name   string
		mangle func([]byte) []byte
		want   string
	}{
		{"truncated footer", func(b []byte) []byte { return b[len(b)-footerLen+1:] }, "too short"},
		{"no magic", func(b []byte) []byte { b[len(b)-1] = 'X'; return b }, "no LANC"},
		{"cut before the metadata", func(b []byte) []byte { return b[gbo-100:] }, "out of order or past the end"},
		{"global buffers' table past the end", u64(foot+16, uint64(size)), "out of order or past the end"},
		{"a billion columns", u32(foot+28, 1<<30), "columns' offsets do not fit"},
		{"a billion global buffers", u32(foot+24, 1<<30), "global buffers' offsets do not fit"},
		{"schema of a terabyte", u64(gbo+8, 1<<40), "global buffer 0"},
		{"column metadata of a terabyte", u64(cmo+8, 1<<40), "column 0's metadata"},
		{"column metadata before its section", u64(cmo, 0), "column 0's metadata"},
		{"bad protobuf", func(b []byte) []byte {
			at := int(binary.LittleEndian.Uint64(b[cmo:]))
			b[at] = 0xff // a tag of field 31 of wire type 7
			return b
		}, "protobuf"},
		{"file format 2.2", func(b []byte) []byte { binary.LittleEndian.PutUint16(b[foot+34:], 2); return b }, "file format 2.2"},
		{"file format 2.0", func(b []byte) []byte {
			binary.LittleEndian.PutUint16(b[foot+32:], 0)
			binary.LittleEndian.PutUint16(b[foot+34:], 3)
			return b
		}, "file format 2.0"},
		{"a zstd value declaring a terabyte", u64(imgData+1+4, 1<<40), "over the memory limit"},
		{"a zstd value declaring a byte more", func(b []byte) []byte {
			n := binary.LittleEndian.Uint64(b[imgData+5:])
			binary.LittleEndian.PutUint64(b[imgData+5:], n+1)
			return b
		}, "declared"},
		{"a value's size past its row", u32(imgData+1, 1<<31), "a value of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mangle(bytes.Clone(orig))
			err := readAll(key, b, 1<<20)
			if err == nil {
				t.Fatal("read")
			}
			if !errors.Is(err, format.ErrInvalid) && !errors.Is(err, format.ErrUnsupported) {
				t.Fatalf("%v: neither invalid nor unsupported", err)
			}
			if !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v: does not name the file and say %q", err, tt.want)
			}
		})
	}
	// Rows beyond the limit are refused before they are read.
	f := readFile(t, key, orig)
	if _, err := f.ReadRows(0, 0, f.Rows, func(off, n uint64) ([]byte, error) { return orig[off : off+n], nil }, 8); err == nil || !strings.Contains(err.Error(), "memory limit") {
		t.Fatalf("3 rows in 8 bytes: %v", err)
	}
}

func readFile(t *testing.T, key string, b []byte) *File {
	t.Helper()
	f, _, err := ParseFile(key, int64(len(b)), b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A data file the manifest names but the store lacks is an error naming it.
func TestMissingDataFile(t *testing.T) {
	st, _, ms := fixture(t, "basic")
	key := "data/" + ms[0].Fragments[0].Files[0].Path + ".gone"
	_, err := ReadFile(context.Background(), st, key, "", 100000, 1<<30)
	if err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("a missing file: %v", err)
	}
}

// wrapManifest makes a manifest file of the protobuf m: its u32 length,
// m, the trailer.
func wrapManifest(m []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(m)))
	b = append(b, m...)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = append(b, 0, 0, 2, 0)
	return append(b, magic[:]...)
}

// manifestProto is the protobuf of the fixture's manifest file b.
func manifestProto(t *testing.T, b []byte) []byte {
	pos := binary.LittleEndian.Uint64(b[len(b)-16:])
	return bytes.Clone(b[pos+4 : len(b)-16])
}

// Hostile manifests are refused naming the file: what this reader does
// not know wrapping format.ErrUnsupported, the malformed format.ErrInvalid.
func TestHostileManifests(t *testing.T) {
	_, objs, _ := fixture(t, "basic")
	vs, _ := Versions(objs)
	orig, err := os.ReadFile(filepath.Join("testdata", "basic.lance", vs[len(vs)-1].Key))
	if err != nil {
		t.Fatal(err)
	}
	m := manifestProto(t, orig)
	if _, err := ParseManifest("x.manifest", wrapManifest(m)); err != nil {
		t.Fatalf("rewrapped: %v", err)
	}
	flags := func(v uint64) []byte {
		return wrapManifest(protowire.AppendVarint(protowire.AppendTag(bytes.Clone(m), 9, protowire.VarintType), v))
	}
	var df []byte // a data file under base path 1
	df = protowire.AppendTag(df, 1, protowire.BytesType)
	df = protowire.AppendString(df, "elsewhere.lance")
	df = protowire.AppendTag(df, 7, protowire.VarintType)
	df = protowire.AppendVarint(df, 1)
	var frag []byte
	frag = protowire.AppendTag(frag, 2, protowire.BytesType)
	frag = protowire.AppendBytes(frag, df)
	based := protowire.AppendTag(bytes.Clone(m), 2, protowire.BytesType)
	based = protowire.AppendBytes(based, frag)
	tests := []struct {
		name        string
		b           []byte
		unsupported bool
		want        string
	}{
		{"truncated", orig[:len(orig)-3], false, "no LANC"},
		{"too short", orig[len(orig)-10:], false, "too short"},
		{"position past the end", func() []byte {
			b := bytes.Clone(orig)
			binary.LittleEndian.PutUint64(b[len(b)-16:], uint64(len(b)))
			return b
		}(), false, "past the end"},
		{"length not the manifest's", func() []byte {
			b := wrapManifest(m)
			binary.LittleEndian.PutUint32(b, uint32(len(m)+1))
			return b
		}(), false, "bytes before the trailer"},
		{"bad protobuf", wrapManifest(append(bytes.Clone(m), 0x0a, 0x80)), false, "protobuf"},
		{"unknown reader flag", flags(1 | 32), true, "reader feature flags 0x20 unknown"},
		{"a file under another base path", wrapManifest(based), true, "base path 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest("x.manifest", tt.b)
			if err == nil {
				t.Fatal("parsed")
			}
			kind := format.ErrInvalid
			if tt.unsupported {
				kind = format.ErrUnsupported
			}
			if !errors.Is(err, kind) || !strings.Contains(err.Error(), "x.manifest") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v: not %v naming x.manifest and saying %q", err, kind, tt.want)
			}
		})
	}
	// Known flags are read: deletion files, stable row ids, table config, base paths.
	if _, err := ParseManifest("x.manifest", flags(1|2|4|8|16)); err != nil {
		t.Fatal(err)
	}
}

// Versions reads both naming schemes and passes over what is no
// manifest; a version named twice is refused.
func TestVersions(t *testing.T) {
	objs := []format.Object{
		{Key: "_versions/18446744073709551614.manifest"}, // V2: version 1
		{Key: "_versions/3.manifest"},                    // V1
		{Key: "_versions/18446744073709551613.manifest"}, // V2: version 2
		{Key: "_versions/latest_version_hint.json"},
		{Key: "_versions/d1234.manifest"}, // detached
		{Key: "_versions/x/5.manifest"},
		{Key: "data/7.manifest"},
	}
	vs, err := Versions(objs)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, v := range vs {
		got = append(got, v.Version)
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("versions %v", got)
	}
	if _, err := Versions(append(objs, format.Object{Key: "_versions/1.manifest"})); err == nil {
		t.Fatal("version 1 named twice")
	}
	// A manifest of another version than its name's is refused.
	st, objs2, _ := fixture(t, "v1names")
	vs2, _ := Versions(objs2)
	v := vs2[0]
	v.Version = 9
	if _, err := ReadManifest(context.Background(), st, v, 1<<30); err == nil || !strings.Contains(err.Error(), "named 9") {
		t.Fatalf("a manifest of version 1 named 9: %v", err)
	}
}

// Hostile deletion files are refused naming the file.
func TestHostileDeletions(t *testing.T) {
	st, objs, ms := fixture(t, "basic")
	fr := ms[len(ms)-1].Fragments[0]
	key := fr.Deletion.Path(fr.ID)
	size := sizeOf(t, objs, key)
	orig, err := os.ReadFile(filepath.Join(st.root, key))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mangle func(fr *Fragment, size *int64, b []byte) []byte
		want   string
	}{
		{"fewer than the manifest says", func(fr *Fragment, _ *int64, b []byte) []byte {
			d := *fr.Deletion
			d.NumDeleted++
			fr.Deletion = &d
			return b
		}, "the manifest says"},
		{"more deleted than rows", func(fr *Fragment, _ *int64, b []byte) []byte {
			fr.PhysicalRows = 3
			return b
		}, "deleted of 3"},
		{"a file larger than its rows need", func(_ *Fragment, size *int64, b []byte) []byte {
			*size = 1 << 30
			return b
		}, "bytes for"},
		{"garbage", func(_ *Fragment, _ *int64, b []byte) []byte {
			for i := 8; i < len(b)-8; i++ {
				b[i] ^= 0x5a
			}
			return b
		}, "arrow"},
		{"a zstd body declaring a gigabyte", func(fr *Fragment, size *int64, _ []byte) []byte {
			b := zstdDeletions(t, 0, 2, 5)
			// The body's one buffer: its u64 decoded length, then the frame.
			i := bytes.Index(b, []byte{0x28, 0xb5, 0x2f, 0xfd})
			if i < 8 {
				t.Fatal("no zstd body")
			}
			binary.LittleEndian.PutUint64(b[i-8:], 1<<30)
			d := *fr.Deletion
			d.NumDeleted = 3
			fr.Deletion = &d
			*size = int64(len(b))
			return b
		}, "declaring 1073741824 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := fr
			sz := size
			b := tt.mangle(&fr, &sz, bytes.Clone(orig))
			mem := &memStore{key: key, b: b}
			_, err := ReadDeletions(context.Background(), mem, &fr, key, "", sz, 1<<30)
			if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v: does not name %s and say %q", err, key, tt.want)
			}
		})
	}
}

// zstdDeletions is an Arrow IPC file of the offsets offs, its body
// compressed with zstd, as Lance writes larger deletion files.
func zstdDeletions(t *testing.T, offs ...uint32) []byte {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "row_id", Type: arrow.PrimitiveTypes.Uint32}}, nil)
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema), ipc.WithZstd())
	if err != nil {
		t.Fatal(err)
	}
	bld := array.NewUint32Builder(memory.NewGoAllocator())
	bld.AppendValues(offs, nil)
	col := bld.NewArray()
	rec := array.NewRecord(schema, []arrow.Array{col}, int64(len(offs)))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A deletion file with a zstd body reads (arrow-go's reader decompresses it).
func TestZstdDeletions(t *testing.T) {
	b := zstdDeletions(t, 7, 0, 2)
	fr := &Fragment{ID: 1, PhysicalRows: 10, Deletion: &DeletionFile{NumDeleted: 3}}
	got, err := ReadDeletions(context.Background(), &memStore{key: "d", b: b}, fr, "d", "", int64(len(b)), 1<<30)
	if err != nil || len(got) != 3 || got[0] != 0 || got[1] != 2 || got[2] != 7 {
		t.Fatalf("%v %v", got, err)
	}
}

// memStore is a format.Store of one object held in memory.
type memStore struct {
	key string
	b   []byte
}

func (m *memStore) ReadRange(_ context.Context, key, _ string, off int64, p []byte) error {
	if key != m.key || off < 0 || off+int64(len(p)) > int64(len(m.b)) {
		return errors.New("no such range")
	}
	copy(p, m.b[off:])
	return nil
}

// A blob description past the file's data, or naming levels a blob page
// does not have, is refused naming the file; one of a terabyte is refused
// before it is read.
func TestHostileBlobs(t *testing.T) {
	_, _, ms := fixture(t, "blob")
	key := "data/" + ms[0].Fragments[0].Files[0].Path
	orig, err := os.ReadFile(filepath.Join("testdata", "blob.lance", key))
	if err != nil {
		t.Fatal(err)
	}
	f := readFile(t, key, orig)
	// Row r's description: after the chunk's 8-byte header.
	desc := func(r int) int { return int(f.Columns[1].Pages[0].Buffers[1].Off) + 8 + 16*r }
	for _, tt := range []struct {
		name      string
		pos, size uint64
		want      string
	}{
		{"past the end", uint64(len(orig)), 10, "past the data's end"},
		{"a terabyte", 0, 1 << 40, "past the data's end"},
		{"levels of a list", 1, 0, "levels"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := bytes.Clone(orig)
			binary.LittleEndian.PutUint64(b[desc(0):], tt.pos)
			binary.LittleEndian.PutUint64(b[desc(0)+8:], tt.size)
			err := readAll(key, b, 1<<20)
			if !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v: not naming %s and saying %q", err, key, tt.want)
			}
		})
	}
}
