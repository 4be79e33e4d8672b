package lance

import (
	"os"
	"path/filepath"
	"testing"
)

// fuzzLimit bounds what a fuzzed file's values may decode to.
const fuzzLimit = 1 << 20

// seedFiles adds the manifests or data files of the fixtures to f, those
// under 64 KiB (the fuzzer slows on larger inputs).
func seedFiles(f *testing.F, glob string) {
	for _, name := range fixtures {
		paths, _ := filepath.Glob(filepath.Join("testdata", name+".lance", glob))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			if len(b) <= 64<<10 {
				f.Add(b)
			}
		}
	}
}

// ParseManifest never panics, and allocates no more than its input.
func FuzzManifest(f *testing.F) {
	seedFiles(f, "_versions/*.manifest")
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest("fuzz.manifest", b)
		if err == nil && m == nil {
			t.Fatal("no manifest and no error")
		}
	})
}

// ParseFile never panics on a data file, and where it parses, reading
// every column's rows never panics and stays within the limit.
func FuzzFooter(f *testing.F) {
	seedFiles(f, "data/*.lance")
	f.Fuzz(func(t *testing.T, b []byte) {
		file, need, err := ParseFile("fuzz.lance", int64(len(b)), b)
		if err != nil || file == nil {
			if err == nil && need <= int64(len(b)) {
				t.Fatalf("no file, no error, and a need of %d in %d bytes", need, len(b))
			}
			return
		}
		read := func(off, n uint64) ([]byte, error) {
			if off > uint64(len(b)) || n > uint64(len(b))-off {
				t.Fatalf("read %d bytes at %d of %d: past the checks", n, off, len(b))
			}
			return b[off : off+n], nil
		}
		for c := range file.Columns {
			vals, err := file.ReadRows(c, 0, file.Rows, read, fuzzLimit)
			if err != nil {
				continue
			}
			if vals.Len() != int(file.Rows) {
				t.Fatalf("column %d: %d values of %d rows", c, vals.Len(), file.Rows)
			}
			if len(vals.Data) > fuzzLimit {
				t.Fatalf("column %d: %d bytes decoded, over the limit", c, len(vals.Data))
			}
		}
	})
}

// arrowRowOffsets and roaringOffsets never panic, and never read more
// offsets than asked.
func FuzzDeletion(f *testing.F) {
	seedFiles(f, "_deletions/*")
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, read := range []func([]byte, uint64) ([]uint32, error){arrowRowOffsets, roaringOffsets} {
			offs, err := read(b, 6000)
			if err == nil && len(offs) > 6000 {
				t.Fatalf("%d offsets of at most 6000", len(offs))
			}
		}
	})
}
