package format

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

type member struct{ ext, data string }

func write(t *testing.T, bound int64, samples map[string][]member, keys []string) []byte {
	t.Helper()
	dst := make([]byte, bound)
	w, err := NewWriter(dst, len(keys), WriterOptions{ModTime: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := w.Begin(k); err != nil {
			t.Fatal(err)
		}
		for _, m := range samples[k] {
			if err := w.Add(m.ext, []byte(m.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return dst
}

func boundOf(samples map[string][]member) int64 {
	n := Overhead(len(samples))
	for k, ms := range samples {
		for _, m := range ms {
			n += MemberLen(len(k)+1+len(m.ext), int64(len(m.data)))
		}
	}
	return n
}

// Every sample of a resident chunk is a run of tar members that
// archive/tar reads back, with the names, sizes and time written.
func TestResidentRoundTrip(t *testing.T) {
	long := strings.Repeat("d/", 60) + "x"
	samples := map[string][]member{
		"a/0": {{"jpg", "\xff\xd8 image"}, {"cls", "3"}},
		"a/1": {{"txt", strings.Repeat("t", 1000)}},
		long:  {{"json", "{}"}, {"npy", ""}},
	}
	keys := []string{"a/0", "a/1", long}
	b := write(t, boundOf(samples)+777, samples, keys) // a bound with room to spare
	tab, err := Verify(b)
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != 3 {
		t.Fatalf("%d samples", tab.Len())
	}
	for i, k := range keys {
		off, n, _ := tab.Sample(i)
		tr := tar.NewReader(bytes.NewReader(b[off : off+n]))
		for _, m := range samples[k] {
			h, err := tr.Next()
			if err != nil {
				t.Fatalf("sample %q: %v", k, err)
			}
			if h.Name != k+"."+m.ext || h.ModTime.Unix() != 1700000000 || h.Mode != 0o644 {
				t.Errorf("header %+v", h)
			}
			got, _ := io.ReadAll(tr)
			if string(got) != m.data {
				t.Errorf("%s: %q", h.Name, got)
			}
		}
		if _, err := tr.Next(); err != io.EOF {
			t.Errorf("sample %q: more members: %v", k, err)
		}
	}
}

// The bound is exact: MemberLen and Overhead add up to what the writer
// needs, and one byte less is refused, never written past.
func TestResidentBoundExact(t *testing.T) {
	samples := map[string][]member{"k": {{"bin", strings.Repeat("x", 513)}}}
	write(t, boundOf(samples), samples, []string{"k"})
	dst := make([]byte, boundOf(samples)-1)
	w, _ := NewWriter(dst, 1, WriterOptions{})
	w.Begin("k")
	if err := w.Add("bin", []byte(strings.Repeat("x", 513))); !errors.Is(err, ErrOverBound) || !errors.Is(err, ErrDamaged) {
		t.Fatalf("over the bound: %v", err)
	}
}

func TestResidentCountsChecked(t *testing.T) {
	dst := make([]byte, 1<<16)
	w, _ := NewWriter(dst, 2, WriterOptions{})
	w.Begin("a")
	w.Add("x", []byte("1"))
	if err := w.Finish(); !errors.Is(err, ErrDamaged) {
		t.Fatalf("one sample of two: %v", err)
	}
	w, _ = NewWriter(dst, 1, WriterOptions{})
	w.Begin("a")
	w.Add("x", []byte("1"))
	if err := w.Begin("b"); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a sample too many: %v", err)
	}
	w, _ = NewWriter(dst, 1, WriterOptions{})
	w.Begin("a")
	if err := w.Finish(); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a sample without members: %v", err)
	}
}

// A flipped byte anywhere in a sample, the table or the footer is found.
func TestResidentDamageFound(t *testing.T) {
	samples := map[string][]member{"a": {{"x", "hello"}}, "b": {{"y", "world"}}}
	good := write(t, boundOf(samples), samples, []string{"a", "b"})
	tab, _ := ReadTable(good)
	off, _, _ := tab.Sample(1)
	for _, at := range []int{10, int(off) + 512, len(good) - FooterLen - 3, len(good) - 10, len(good) - 1} {
		b := bytes.Clone(good)
		b[at] ^= 1
		if _, err := Verify(b); !errors.Is(err, ErrDamaged) {
			t.Errorf("byte %d flipped: %v", at, err)
		}
	}
	if _, err := ReadTable(good[:20]); !errors.Is(err, ErrDamaged) {
		t.Error("short buffer")
	}
}

func TestRead(t *testing.T) {
	rs := []Range{{10, 5}, {20, 3}}
	r, err := NewRead(rs, []byte("abcdeXYZ"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := r.Bytes(11, 3); err != nil || string(b) != "bcd" {
		t.Fatal(string(b), err)
	}
	if _, err := r.Bytes(13, 4); !errors.Is(err, ErrDamaged) {
		t.Fatal("across a gap")
	}
	p := make([]byte, 3)
	if n, err := r.ReadAt(p, 21); n != 2 || err != io.EOF || string(p[:2]) != "YZ" {
		t.Fatal(n, err)
	}
	if _, err := r.ReadAt(p, 16); !errors.Is(err, ErrDamaged) {
		t.Fatal("in a gap", err)
	}
	if _, err := NewRead(rs, []byte("short")); !errors.Is(err, ErrDamaged) {
		t.Fatal("short src")
	}
}

func TestMergeAndSelect(t *testing.T) {
	got := Merge([]Range{{20, 5}, {0, 10}, {10, 5}, {30, 0}, {24, 2}})
	if len(got) != 2 || got[0] != (Range{0, 15}) || got[1] != (Range{20, 6}) {
		t.Fatal(got)
	}
	fs := []Field{{Name: "image"}, {Name: "label"}, {Name: "text"}}
	sel, err := Select(fs, []string{"text", "image"})
	if err != nil || len(sel) != 2 || sel[0] != 0 || sel[1] != 2 || sel.Names(fs) != "image,text" || sel.Has(1) {
		t.Fatal(sel, err)
	}
	if sel, _ := Select(fs, []string{"text", "image", "label"}); sel != nil {
		t.Fatal("all named is nil")
	}
	if _, err := Select(fs, []string{"nope"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "image, label, text") {
		t.Fatal(err)
	}
}

// Names past ustar's 100 bytes take a PAX header, which MemberLen counts.
func TestResidentBoundLongNames(t *testing.T) {
	for _, n := range []int{95, 96, 100, 101, 200, 600} {
		k := strings.Repeat("k", n)
		samples := map[string][]member{k: {{"jpg", "x"}, {"cls", "1"}}}
		b := write(t, boundOf(samples), samples, []string{k})
		if _, err := Verify(b); err != nil {
			t.Fatal(n, err)
		}
	}
}

func TestEntryIsTheTables(t *testing.T) {
	samples := map[string][]member{"a": {{"x", "hello"}}, "b": {{"y", strings.Repeat("w", 700)}}}
	b := write(t, boundOf(samples)+100, samples, []string{"a", "b"})
	tab, _ := ReadTable(b)
	for i := range 2 {
		o1, n1, c1 := tab.Sample(i)
		o2, n2, c2 := Entry(b, i)
		if o1 != o2 || n1 != n2 || c1 != c2 {
			t.Fatal(i, o1, o2, n1, n2, c1, c2)
		}
	}
}

// A decode that may grow counts what its chunk needs past the bound, and
// decodes whole into a buffer of that size; one that may not is damaged.
func TestResidentGrow(t *testing.T) {
	samples := map[string][]member{"a": {{"x", strings.Repeat("1", 600)}}, "b": {{"y", strings.Repeat("2", 2000)}}}
	keys := []string{"a", "b"}
	exact := boundOf(samples)
	run := func(bound int64, grow bool) error {
		w, _ := NewWriter(make([]byte, bound), 2, WriterOptions{MayGrow: grow})
		for _, k := range keys {
			w.Begin(k)
			for _, m := range samples[k] {
				if err := w.Add(m.ext, []byte(m.data)); err != nil {
					return err
				}
			}
		}
		return w.Finish()
	}
	err := run(exact-1000, true)
	var ge *GrowError
	if !errors.As(err, &ge) || ge.Need != exact {
		t.Fatalf("grow: %v, want a GrowError of %d", err, exact)
	}
	if err := run(ge.Need, true); err != nil {
		t.Fatal(err)
	}
	if err := run(exact-1000, false); !errors.Is(err, ErrOverBound) {
		t.Fatal(err)
	}
}

// archiveTarHeader is the header archive/tar writes for a member as
// Writer's were written before its ustar template: the reference.
func archiveTarHeader(name string, n, mtime int64) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	h := tar.Header{Typeflag: tar.TypeReg, Name: name, Size: n, Mode: 0o644, ModTime: time.Unix(mtime, 0).UTC(), Format: tar.FormatUSTAR}
	if len(name) > 100 {
		h.Format = tar.FormatPAX
	}
	err := tw.WriteHeader(&h)
	return b.Bytes(), err
}

// Every member's header is byte for byte archive/tar's (members are
// byte-identical to a packed tar chunk's, and every node decodes a chunk
// alike), whether Writer fills its ustar template or, for a name ustar
// cannot hold, goes through archive/tar: names of 1 to 100 bytes, over
// 100 (PAX), paths, non-ASCII bytes (refused, as archive/tar does), sizes of zero to 8 GiB − 1, and
// times from 1970 to ustar's last second.
func TestMemberHeadersAreArchiveTars(t *testing.T) {
	names := []struct{ key, ext string }{
		{"a", "jpg"}, {"train/00001/row-000042", "cls"}, {strings.Repeat("k", 96), "jpg"}, {strings.Repeat("k", 95), "json"},
		{strings.Repeat("k", 97), "jpg"}, {strings.Repeat("p/", 60), "npy"}, {"ñandú", "txt"}, {"key with spaces", "tar.gz"},
	}
	sizes := []int64{0, 1, 511, 512, 513, 75 << 10, 1<<33 - 1}
	for _, mtime := range []int64{0, 1, 1700000000, 1<<33 - 1} {
		for _, nm := range names {
			for _, n := range sizes {
				name := nm.key + "." + nm.ext
				w, err := NewWriter(make([]byte, Overhead(0)), 0, WriterOptions{ModTime: mtime})
				if err != nil {
					t.Fatal(err)
				}
				want, terr := archiveTarHeader(name, n, mtime)
				w.dst, w.limit = make([]byte, max(len(want), HeaderLen)), int64(max(len(want), HeaderLen))
				err = w.header(nm.key, nm.ext, n)
				if terr != nil || err != nil {
					// A name ustar cannot hold (non-ASCII): refused alike.
					if terr == nil || !errors.Is(err, ErrDamaged) {
						t.Errorf("%q, %d bytes, at %d: %v, archive/tar: %v", name, n, mtime, err, terr)
					}
					continue
				}
				if got := w.dst[:w.n]; !bytes.Equal(got, want) {
					t.Errorf("%q, %d bytes, at %d: the header differs from archive/tar's (%d bytes against %d)", name, n, mtime, len(got), len(want))
				}
			}
		}
	}
}

// A member whose header fits ustar costs no allocation: archive/tar's
// writer cost one or more a member (and a quarter of a decode's CPU).
func TestMemberAllocatesNothing(t *testing.T) {
	const members = 64
	dst := make([]byte, members*MemberLen(40, 100)+Overhead(members))
	w, err := NewWriter(dst, members, WriterOptions{ModTime: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	allocs := testing.AllocsPerRun(members-1, func() {
		if err := w.Begin("train/00001/row-00000042"); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Member("jpg", 100); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations a member, want none", allocs)
	}
}

// TestWriterKnownAndWatch: a member's CRC32C given with Known makes the
// same table as the writer reading the data again, and Watch is told of
// each member's bytes, its data's start where the header is ustar's.
func TestWriterKnownAndWatch(t *testing.T) {
	data := [][]byte{bytes.Repeat([]byte("photo"), 3001), []byte("7"), {}, bytes.Repeat([]byte{0xff}, 512)}
	write := func(known bool) ([]byte, [][3]int64) {
		dst := make([]byte, 1<<16)
		w, err := NewWriter(dst, 2, WriterOptions{ModTime: 1700000000})
		if err != nil {
			t.Fatal(err)
		}
		var seen [][3]int64
		w.Watch(func(from, to, data int64) { seen = append(seen, [3]int64{from, to, data}) })
		for s := range 2 {
			if err := w.Begin(fmt.Sprintf("k/%d", s)); err != nil {
				t.Fatal(err)
			}
			for _, d := range data[2*s : 2*s+2] {
				p, err := w.Member("bin", int64(len(d)))
				if err != nil {
					t.Fatal(err)
				}
				copy(p, d)
				if known {
					w.Known(crc32.Checksum(d, castagnoli))
				}
			}
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		return dst, seen
	}
	plain, seen := write(false)
	joined, _ := write(true)
	if _, err := Verify(joined); err != nil || !bytes.Equal(plain, joined) {
		t.Fatalf("with Known: %v, equal %t", err, bytes.Equal(plain, joined))
	}
	want := [][3]int64{{0, 512 + 15360, 512}, {15872, 15872 + 1024, 15872 + 512}, {16896, 16896 + 512, 16896 + 512}, {17408, 17408 + 1024, 17408 + 512}}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("Watch saw %v, want %v", seen, want)
	}
}
