package lance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/brandgw/brand/format"
)

// A Dataset is one version of a Lance dataset: its manifest, and the
// objects of its listing its fragments name. It keeps each data file's
// metadata once read, and is not safe for concurrent use.
type Dataset struct {
	Manifest *Manifest
	st       format.Store
	objs     map[string]format.Object
	files    map[string]*File
	limit    int64 // Options.MemoryLimit
}

// Open opens version v of the dataset whose listing (keys relative to
// its root) is objs, or its latest version where v is 0, its reads
// bounded by opts.
func Open(ctx context.Context, st format.Store, objs []format.Object, v uint64, opts Options) (*Dataset, error) {
	vs, err := Versions(objs)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: lance: no manifest under _versions/", format.ErrInvalid)
	}
	i := len(vs) - 1
	if v != 0 {
		i = slices.IndexFunc(vs, func(x Version) bool { return x.Version == v })
		if i < 0 {
			return nil, fmt.Errorf("%w: lance: no version %d (the latest is %d)", format.ErrInvalid, v, vs[len(vs)-1].Version)
		}
	}
	m, err := ReadManifest(ctx, st, vs[i], opts.limit())
	if err != nil {
		return nil, err
	}
	d := &Dataset{Manifest: m, st: st, objs: map[string]format.Object{}, files: map[string]*File{}, limit: opts.limit()}
	for _, o := range objs {
		d.objs[o.Key] = o
	}
	return d, nil
}

// object is the listed object key, which a manifest of d names.
func (d *Dataset) object(key string, size uint64) (format.Object, error) {
	o, ok := d.objs[key]
	if !ok {
		return o, fmt.Errorf("%w: lance manifest of version %d names %s, which the listing lacks", format.ErrInvalid, d.Manifest.Version, key)
	}
	if size != 0 && uint64(o.Size) != size {
		return o, fmt.Errorf("%w: lance: %s is %d bytes, its manifest says %d", format.ErrInvalid, key, o.Size, size)
	}
	return o, nil
}

// File is the metadata of a fragment's data file, read once.
func (d *Dataset) File(ctx context.Context, df DataFile) (*File, error) {
	key := "data/" + df.Path
	if f := d.files[key]; f != nil {
		return f, nil
	}
	o, err := d.object(key, df.Size)
	if err != nil {
		return nil, err
	}
	f, err := ReadFile(ctx, d.st, key, o.ETag, o.Size, d.limit)
	if err != nil {
		return nil, err
	}
	d.files[key] = f
	return f, nil
}

// Column reads every live row of the top-level field name, fragment by
// fragment in the manifest's order, deleted rows left out, and each
// row's address (fragment id << 32 | offset). A fragment without a file
// holding the field reads as nulls. The dataset's memory limit bounds
// the read: each fragment's deletion file and values are read against
// what the rows kept from the fragments before them left of it.
func (d *Dataset) Column(ctx context.Context, name string) (*Values, []uint64, error) {
	i := slices.IndexFunc(d.Manifest.Fields, func(f Field) bool { return f.Name == name && f.ParentID == -1 })
	if i < 0 {
		return nil, nil, fmt.Errorf("%w: lance: no field %q", format.ErrInvalid, name)
	}
	id := d.Manifest.Fields[i].ID
	var packed []uint64
	if slices.ContainsFunc(d.Manifest.Fields, func(f Field) bool { return f.ParentID == id }) {
		var err error
		if packed, err = d.Manifest.packedBits(d.Manifest.Fields[i]); err != nil {
			return nil, nil, err
		}
	}
	out := newValues(0)
	var addrs []uint64
	left := d.limit
	for fi := range d.Manifest.Fragments {
		fr := &d.Manifest.Fragments[fi]
		var dels []uint32
		if fr.Deletion != nil {
			key := fr.Deletion.Path(fr.ID)
			o, err := d.object(key, 0)
			if err != nil {
				return nil, nil, err
			}
			if dels, err = ReadDeletions(ctx, d.st, fr, key, o.ETag, o.Size, left); err != nil {
				return nil, nil, err
			}
		}
		vals, err := d.fragmentColumn(ctx, fr, id, packed, left)
		if err != nil {
			return nil, nil, err
		}
		kept, rows := len(out.Data), len(addrs)
		for r := range vals.Len() {
			if len(dels) > 0 && dels[0] == uint32(r) {
				dels = dels[1:]
				continue
			}
			v, ok := vals.Value(r)
			out.add(v, ok)
			addrs = append(addrs, fr.ID<<32|uint64(r))
		}
		// What this fragment's rows keep: their bytes, and each row's
		// offset, null flag and address.
		left -= int64(len(out.Data)-kept) + int64(len(addrs)-rows)*(valueOverhead+8)
	}
	return out, addrs, nil
}

// fragmentColumn reads every row of field id in the fragment fr: where
// packed is not nil, a packed struct whose every page must pack
// children of those widths.
func (d *Dataset) fragmentColumn(ctx context.Context, fr *Fragment, id int32, packed []uint64, limit int64) (*Values, error) {
	for _, df := range fr.Files {
		j := slices.Index(df.Fields, id)
		if j < 0 {
			continue
		}
		if j >= len(df.ColumnIndices) || df.ColumnIndices[j] < 0 {
			return nil, fmt.Errorf("%w: lance: %s holds field %d in no column of its own", format.ErrUnsupported, df.Path, id)
		}
		f, err := d.File(ctx, df)
		if err != nil {
			return nil, err
		}
		if f.Rows != fr.PhysicalRows {
			return nil, fmt.Errorf("%w: lance file data/%s: %d rows, its fragment %d", format.ErrInvalid, df.Path, f.Rows, fr.PhysicalRows)
		}
		col := int(df.ColumnIndices[j])
		if packed != nil && col < len(f.Columns) {
			for pi, p := range f.Columns[col].Pages {
				if m := p.Layout.MiniBlock; m == nil || packedWidth(m.Values) == 0 || !slices.Equal(m.Values.PackedBits, packed) {
					return nil, fmt.Errorf("%w: lance file data/%s, column %d, page %d: field %d is a packed struct of %v bits, the page %v", format.ErrUnsupported, df.Path, col, pi, id, packed, p.Layout)
				}
			}
		}
		read := func(off, n uint64) ([]byte, error) {
			b := make([]byte, n)
			return b, d.st.ReadRange(ctx, "data/"+df.Path, d.objs["data/"+df.Path].ETag, int64(off), b)
		}
		return f.ReadRows(col, 0, f.Rows, read, limit)
	}
	// No file holds the field: a column added since, null in this fragment.
	if fr.PhysicalRows > uint64(max(limit, 0))/valueOverhead {
		return nil, overLimit(fmt.Sprintf("lance: fragment %d's %d null rows", fr.ID, fr.PhysicalRows), fr.PhysicalRows*valueOverhead, limit)
	}
	v := newValues(int(fr.PhysicalRows))
	for range fr.PhysicalRows {
		v.add(nil, false)
	}
	return v, nil
}

// packedBits is the widths of a packed struct's children, in bits, in
// the order Lance packs them: a struct field with the metadata
// lance-encoding:packed (or the older packed) "true" whose children are
// all fixed-width values of whole bytes, as Lance 8.0 writes it in file
// format 2.1. Any other nested field is refused.
func (m *Manifest) packedBits(fd Field) ([]uint64, error) {
	isPacked := fd.LogicalType == "struct" && (strings.EqualFold(fd.Metadata["lance-encoding:packed"], "true") || strings.EqualFold(fd.Metadata["packed"], "true"))
	if !isPacked {
		return nil, fmt.Errorf("%w: lance: field %q is nested (%s)", format.ErrUnsupported, fd.Name, fd.LogicalType)
	}
	var bits []uint64
	for _, c := range m.Fields {
		if c.ParentID != fd.ID {
			continue
		}
		w := fixedBits(c.LogicalType)
		if w == 0 || slices.ContainsFunc(m.Fields, func(g Field) bool { return g.ParentID == c.ID }) {
			return nil, fmt.Errorf("%w: lance: packed struct %q has a child %q of %s, not a fixed-width value of whole bytes", format.ErrUnsupported, fd.Name, c.Name, c.LogicalType)
		}
		bits = append(bits, w)
	}
	return bits, nil
}

// fixedBits is the bits of a value of Lance's logical type typ where it
// is a fixed-width value of whole bytes, or 0.
func fixedBits(typ string) uint64 {
	switch typ {
	case "int8", "uint8":
		return 8
	case "int16", "uint16", "halffloat":
		return 16
	case "int32", "uint32", "float", "date32":
		return 32
	case "int64", "uint64", "double", "date64":
		return 64
	}
	if strings.HasPrefix(typ, "timestamp:") || strings.HasPrefix(typ, "time64:") || strings.HasPrefix(typ, "duration:") {
		return 64
	}
	return 0
}
