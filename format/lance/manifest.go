package lance

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/brandgw/brand/format"
)

// A Manifest is one version of a dataset: its schema and its fragments
// (table.proto's Manifest), as far as a reader of the rows needs it.
type Manifest struct {
	Version     uint64
	Fields      []Field
	Fragments   []Fragment
	ReaderFlags uint64
	WriterFlags uint64
	// DataFormat and DataVersion name the data files' format: "lance"
	// and "2.1" for every file this package reads.
	DataFormat  string
	DataVersion string
	// Writer and WriterVersion name the library that wrote this version
	// ("lance", "8.0.0").
	Writer        string
	WriterVersion string
}

// A Field is one field of a schema (file.proto's Field), nested ones
// included: a child names its parent by ParentID (-1 at the top level).
type Field struct {
	ID       int32
	ParentID int32
	Name     string
	// LogicalType is Lance's name of the Arrow type: "int64", "float",
	// "string", "large_binary", "fixed_size_list:float:768", "struct".
	LogicalType string
	Nullable    bool
	// Kind is PARENT (0), REPEATED (1) or LEAF (2).
	Kind      int
	Extension string
	Metadata  map[string]string
}

// A Fragment is a set of rows stored as data files of the same rows'
// different columns, and the rows of it deleted since.
type Fragment struct {
	ID    uint64
	Files []DataFile
	// Deletion is nil where no row of the fragment is deleted.
	Deletion *DeletionFile
	// PhysicalRows counts the fragment's rows, deleted ones included.
	PhysicalRows uint64
}

// A DataFile is one Lance file of a fragment.
type DataFile struct {
	// Path is relative to the dataset's data/ directory.
	Path string
	// Fields are the field ids the file holds and ColumnIndices the
	// top-level column of each (-1: none, as a packed struct's children;
	// a field id of -2 is a field no longer in use here).
	Fields        []int32
	ColumnIndices []int32
	Major, Minor  uint32
	// Size is the file's size in bytes; 0 is unknown.
	Size uint64
}

// The kinds of deletion file.
const (
	DeletionArrow  = 0 // an Arrow IPC file of one Int32 column: the deleted offsets
	DeletionBitmap = 1 // a roaring bitmap of the deleted offsets
)

// A DeletionFile names the rows of a fragment deleted in a version.
type DeletionFile struct {
	Kind        int
	ReadVersion uint64
	ID          uint64
	NumDeleted  uint64
}

// Path is the deletion file's key under the dataset's root for the
// fragment frag.
func (d DeletionFile) Path(frag uint64) string {
	ext := "arrow"
	if d.Kind == DeletionBitmap {
		ext = "bin"
	}
	return fmt.Sprintf("_deletions/%d-%d-%d.%s", frag, d.ReadVersion, d.ID, ext)
}

// The reader feature flags this package knows (table format's
// versioning.md); a manifest with any other is refused.
const (
	flagDeletionFiles = 1
	flagStableRowIDs  = 2
	flagV2Deprecated  = 4
	flagTableConfig   = 8
	flagBasePaths     = 16
	knownReaderFlags  = flagDeletionFiles | flagStableRowIDs | flagV2Deprecated | flagTableConfig | flagBasePaths
)

// MaxManifestBytes bounds a manifest file: a dataset of a million
// fragments of a few files each has a manifest of about 200 MB, one of a
// hundred thousand 20 MB.
const MaxManifestBytes = 256 << 20

// manifestTail is the manifest file's trailer: the manifest's position
// (u64), the table format's major and minor version (u16 each), "LANC".
const manifestTail = 16

var magic = [4]byte{'L', 'A', 'N', 'C'}

// ParseManifest parses a whole manifest file, name naming it in errors.
// The manifest is the protobuf at the trailer's position, after its u32
// length, ending where the trailer begins. A manifest that reads rows in
// a way this package does not know — an unknown reader feature flag, a
// data file under another base path, a data format other than Lance's —
// is refused (format.ErrUnsupported).
func ParseManifest(name string, b []byte) (*Manifest, error) {
	bad := func(format_ string, a ...any) error {
		return fmt.Errorf("%w: lance manifest %s: %s", format.ErrInvalid, name, fmt.Sprintf(format_, a...))
	}
	if len(b) < manifestTail+4 {
		return nil, bad("%d bytes, too short for a manifest", len(b))
	}
	if len(b) > MaxManifestBytes {
		return nil, bad("%d bytes, over the %d a manifest may be", len(b), MaxManifestBytes)
	}
	tail := b[len(b)-manifestTail:]
	if [4]byte(tail[12:]) != magic {
		return nil, bad("no LANC at the end")
	}
	pos := binary.LittleEndian.Uint64(tail)
	end := uint64(len(b) - manifestTail)
	if pos > end-4 {
		return nil, bad("manifest position %d past the end (%d)", pos, end)
	}
	n := binary.LittleEndian.Uint32(b[pos:])
	if uint64(n) != end-pos-4 {
		return nil, bad("manifest of %d bytes at %d, but %d bytes before the trailer", n, pos, end-pos-4)
	}
	m, err := parseManifest(b[pos+4 : end])
	if err != nil {
		if errors.As(err, new(unsupported)) {
			return nil, fmt.Errorf("%w: lance manifest %s: %v", format.ErrUnsupported, name, err)
		}
		return nil, bad("%v", err)
	}
	if unknown := m.ReaderFlags &^ knownReaderFlags; unknown != 0 {
		return nil, fmt.Errorf("%w: lance manifest %s: reader feature flags %#x unknown", format.ErrUnsupported, name, unknown)
	}
	if m.DataFormat != "" && m.DataFormat != "lance" {
		return nil, fmt.Errorf("%w: lance manifest %s: data format %q", format.ErrUnsupported, name, m.DataFormat)
	}
	return m, nil
}

// unsupported marks a manifest's field that is well formed but read in
// a way this package does not: parseManifest's caller wraps it.
type unsupported struct{ what string }

func (u unsupported) Error() string { return u.what }

func parseManifest(b []byte) (*Manifest, error) {
	m := &Manifest{}
	err := walkPB(b, func(f pbField) error {
		var err error
		switch f.num {
		case 1:
			var fd Field
			if fd, err = parseField(f); err == nil {
				m.Fields = append(m.Fields, fd)
			}
		case 2:
			var fr Fragment
			if fr, err = parseFragment(f); err == nil {
				m.Fragments = append(m.Fragments, fr)
			}
		case 3:
			m.Version, err = f.n, f.want(protowire.VarintType)
		case 9:
			m.ReaderFlags, err = f.n, f.want(protowire.VarintType)
		case 10:
			m.WriterFlags, err = f.n, f.want(protowire.VarintType)
		case 13:
			err = walkSub(f, func(g pbField) error {
				switch g.num {
				case 1:
					m.Writer = string(g.b)
					return g.want(protowire.BytesType)
				case 2:
					m.WriterVersion = string(g.b)
					return g.want(protowire.BytesType)
				}
				return nil
			})
		case 15:
			err = walkSub(f, func(g pbField) error {
				switch g.num {
				case 1:
					m.DataFormat = string(g.b)
					return g.want(protowire.BytesType)
				case 2:
					m.DataVersion = string(g.b)
					return g.want(protowire.BytesType)
				}
				return nil
			})
		}
		if err != nil {
			return fmt.Errorf("field %d: %w", f.num, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// walkSub walks the embedded message f.
func walkSub(f pbField, fn func(g pbField) error) error {
	if err := f.want(protowire.BytesType); err != nil {
		return err
	}
	return walkPB(f.b, fn)
}

func parseField(f pbField) (Field, error) {
	fd := Field{ParentID: -1}
	err := walkSub(f, func(g pbField) error {
		switch g.num {
		case 1:
			fd.Kind = int(g.n)
			return g.want(protowire.VarintType)
		case 2:
			fd.Name = string(g.b)
			return g.want(protowire.BytesType)
		case 3:
			fd.ID = int32(g.n)
			return g.want(protowire.VarintType)
		case 4:
			fd.ParentID = int32(g.n)
			return g.want(protowire.VarintType)
		case 5:
			fd.LogicalType = string(g.b)
			return g.want(protowire.BytesType)
		case 6:
			fd.Nullable = g.n != 0
			return g.want(protowire.VarintType)
		case 9:
			fd.Extension = string(g.b)
			return g.want(protowire.BytesType)
		case 10:
			var k, v string
			if err := walkSub(g, func(e pbField) error {
				switch e.num {
				case 1:
					k = string(e.b)
				case 2:
					v = string(e.b)
				}
				return e.want(protowire.BytesType)
			}); err != nil {
				return err
			}
			if fd.Metadata == nil {
				fd.Metadata = map[string]string{}
			}
			fd.Metadata[k] = v
		}
		return nil
	})
	return fd, err
}

func parseFragment(f pbField) (Fragment, error) {
	var fr Fragment
	err := walkSub(f, func(g pbField) error {
		switch g.num {
		case 1:
			fr.ID = g.n
			return g.want(protowire.VarintType)
		case 2:
			df, err := parseDataFile(g)
			if err != nil {
				return fmt.Errorf("data file %d: %w", len(fr.Files), err)
			}
			fr.Files = append(fr.Files, df)
		case 3:
			d, err := parseDeletion(g)
			if err != nil {
				return fmt.Errorf("deletion file: %w", err)
			}
			fr.Deletion = &d
		case 4:
			fr.PhysicalRows = g.n
			return g.want(protowire.VarintType)
		}
		return nil
	})
	if err != nil {
		return fr, fmt.Errorf("fragment %d: %w", fr.ID, err)
	}
	return fr, nil
}

func parseDataFile(f pbField) (DataFile, error) {
	var df DataFile
	err := walkSub(f, func(g pbField) error {
		var err error
		switch g.num {
		case 1:
			df.Path = string(g.b)
			return g.want(protowire.BytesType)
		case 2:
			df.Fields, err = g.ints(df.Fields, len(f.b))
		case 3:
			df.ColumnIndices, err = g.ints(df.ColumnIndices, len(f.b))
		case 4:
			df.Major = uint32(g.n)
			return g.want(protowire.VarintType)
		case 5:
			df.Minor = uint32(g.n)
			return g.want(protowire.VarintType)
		case 6:
			df.Size = g.n
			return g.want(protowire.VarintType)
		case 7:
			return unsupported{fmt.Sprintf("%s under base path %d, not the dataset's root", df.Path, g.n)}
		}
		return err
	})
	if err != nil {
		return df, err
	}
	if len(df.ColumnIndices) != 0 && len(df.ColumnIndices) != len(df.Fields) {
		return df, fmt.Errorf("%s: %d fields but %d column indices", df.Path, len(df.Fields), len(df.ColumnIndices))
	}
	return df, nil
}

func parseDeletion(f pbField) (DeletionFile, error) {
	var d DeletionFile
	err := walkSub(f, func(g pbField) error {
		switch g.num {
		case 1:
			d.Kind = int(g.n)
		case 2:
			d.ReadVersion = g.n
		case 3:
			d.ID = g.n
		case 4:
			d.NumDeleted = g.n
		case 7:
			return unsupported{fmt.Sprintf("under base path %d, not the dataset's root", g.n)}
		default:
			return nil
		}
		return g.want(protowire.VarintType)
	})
	if err == nil && d.Kind != DeletionArrow && d.Kind != DeletionBitmap {
		err = unsupported{fmt.Sprintf("of kind %d", d.Kind)}
	}
	return d, err
}
