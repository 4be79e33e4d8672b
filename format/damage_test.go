package format

import (
	"errors"
	"strings"
	"testing"
)

// A sample written damaged is found as such from its bytes alone, with
// its cause (cut to the room it has); an intact sample, or one whose
// member is merely named "damaged", is not; a sample with no room to say
// so, or a name a plain ustar header cannot hold, is refused (its chunk
// is then damaged whole).
func TestSampleDamage(t *testing.T) {
	long := strings.Repeat("d", 95) // key + ".damaged" over ustar's 100-byte name, no '/' to split at
	for _, tt := range []struct {
		name      string
		key       string
		write     func(w *Writer, key string) error
		damaged   bool
		cause     string // a prefix of the cause found
		refused   bool
		causeSize int // the most the cause found may be, 0 for any
	}{
		{"intact", "v/000001", func(w *Writer, _ string) error { return w.Add("gop", []byte("frames")) }, false, "", false, 0},
		{"a field called damaged", "v/000001", func(w *Writer, _ string) error { return w.Add(DamagedExt, []byte("not a mark")) }, false, "", false, 0},
		{"damaged", "v/000002", func(w *Writer, key string) error {
			return WriteDamaged(w, key, "GOP 2 of v.mp4 is damaged at rest", MemberLen(len(key)+4, 4000))
		}, true, "GOP 2 of v.mp4 is damaged at rest", false, 0},
		{"damaged, its cause cut to the room", "v/000003", func(w *Writer, key string) error {
			return WriteDamaged(w, key, strings.Repeat("x", 5000), MemberLen(len(key)+4, 1000))
		}, true, "xxx", false, 1024 - len(damagedMagic)},
		{"no room", "v/000004", func(w *Writer, key string) error { return WriteDamaged(w, key, "cause", Block) }, false, "", true, 0},
		{"a name ustar cannot hold", long, func(w *Writer, key string) error {
			return WriteDamaged(w, key, "cause", MemberLen(len(key)+4, 1<<20))
		}, false, "", true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]byte, 64<<10)
			w, err := NewWriter(dst, 1, WriterOptions{ModTime: 1700000000})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Begin(tt.key); err != nil {
				t.Fatal(err)
			}
			err = tt.write(w, tt.key)
			if tt.refused {
				if !errors.Is(err, ErrDamaged) {
					t.Fatalf("written: %v; want an error wrapping ErrDamaged", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			off, n, _ := Entry(dst, 0)
			cause, damaged := SampleDamage(dst[off : off+n])
			if damaged != tt.damaged || !strings.HasPrefix(cause, tt.cause) {
				t.Fatalf("SampleDamage: %q, %t; want %q…, %t", cause, damaged, tt.cause, tt.damaged)
			}
			if tt.causeSize > 0 && len(cause) > tt.causeSize {
				t.Fatalf("a cause of %d bytes in a room for %d", len(cause), tt.causeSize)
			}
		})
	}
	if _, ok := SampleDamage(make([]byte, 100)); ok {
		t.Fatal("a short sample taken for a damaged one")
	}
}
