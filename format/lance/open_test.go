package lance

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
)

// Every column of the latest version of every fixture, read through the
// dataset (deletions applied), is Lance's reader's rows in their order.
func TestDatasetColumns(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			st, objs, _ := fixture(t, name)
			d, err := Open(context.Background(), st, objs, 0, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ref := loadCanonical(t, name)
			rows := ref.Versions[len(ref.Versions)-1].Rows
			for _, fd := range d.Manifest.Fields {
				if fd.ParentID != -1 {
					continue
				}
				vals, addrs, err := d.Column(context.Background(), fd.Name)
				if err != nil {
					t.Fatal(err)
				}
				if vals.Len() != len(rows) || len(addrs) != len(rows) {
					t.Fatalf("%s: %d values, Lance read %d rows", fd.Name, vals.Len(), len(rows))
				}
				for i, row := range rows {
					if a := rowAddr(t, row["_rowaddr"]); a != addrs[i] {
						t.Fatalf("%s row %d: address %d, Lance's %d", fd.Name, i, addrs[i], a)
					}
					b, ok := vals.Value(i)
					got, err := renderField(d.Manifest, fd, b, ok)
					if err != nil {
						t.Fatal(err)
					}
					want := wantJSON(row[fd.Name])
					if got != string(want) {
						t.Fatalf("%s row %d: got %s, Lance read %s", fd.Name, i, got, want)
					}
				}
			}
		})
	}
}

// An older version opens as it was, and a version, a field or a file
// the listing lacks is an error naming it.
func TestOpen(t *testing.T) {
	st, objs, ms := fixture(t, "basic")
	d, err := Open(context.Background(), st, objs, 2, Options{})
	if err != nil || d.Manifest.Version != 2 || len(d.Manifest.Fragments) != 2 {
		t.Fatalf("version 2: %v", err)
	}
	if _, err := Open(context.Background(), st, objs, 9, Options{}); err == nil || !strings.Contains(err.Error(), "no version 9") {
		t.Fatalf("version 9: %v", err)
	}
	d, _ = Open(context.Background(), st, objs, 0, Options{})
	if _, _, err := d.Column(context.Background(), "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("no field: %v", err)
	}
	gone := "data/" + ms[len(ms)-1].Fragments[1].Files[0].Path
	var less []format.Object
	for _, o := range objs {
		if o.Key != gone {
			less = append(less, o)
		}
	}
	d, _ = Open(context.Background(), st, less, 0, Options{})
	if _, _, err := d.Column(context.Background(), "id"); !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), gone) {
		t.Fatalf("a missing file: %v", err)
	}
}
