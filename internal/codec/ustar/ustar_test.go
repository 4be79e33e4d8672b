package ustar

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// archiveTars is the header archive/tar writes for a regular file of mode
// 0644 named name of size bytes modified at mtime, in ustar.
func archiveTars(t *testing.T, name string, size, mtime int64) ([]byte, error) {
	t.Helper()
	var b bytes.Buffer
	err := tar.NewWriter(&b).WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644,
		ModTime: time.Unix(mtime, 0).UTC(), Format: tar.FormatUSTAR})
	return b.Bytes(), err
}

// TestPutIsArchiveTars: for every member that Fits, Put writes
// archive/tar's header byte for byte — names of 1 to 100 bytes, paths,
// sizes of zero to MaxSize, times from 1970 to ustar's last second — and
// Plain reads it back; a member that does not Fit is one archive/tar
// writes otherwise (PAX) or refuses in ustar.
func TestPutIsArchiveTars(t *testing.T) {
	names := [][]string{
		{"a", ".", "jpg"}, {"train/00001/row-000042.cls"}, {strings.Repeat("k", 96), ".", "jpg"}, {strings.Repeat("k", 95), ".json"},
		{strings.Repeat("k", 97), ".", "jpg"}, {strings.Repeat("p/", 60), ".npy"}, {"ñandú.txt"}, {"key with spaces", ".", "tar.gz"},
		{"nul\x00.bin"},
	}
	sizes := []int64{0, 1, 511, 512, 513, 75 << 10, MaxSize, MaxSize + 1}
	for _, mtime := range []int64{0, 1, 1700000000, 1<<33 - 1} {
		tpl, err := NewTemplate(0o644, time.Unix(mtime, 0))
		if err != nil {
			t.Fatal(err)
		}
		for _, parts := range names {
			name := strings.Join(parts, "")
			for _, n := range sizes {
				want, terr := archiveTars(t, name, n, mtime)
				if !Fits(n, parts...) {
					if terr == nil && len(name) <= 100 && n <= MaxSize {
						t.Errorf("%q, %d bytes: archive/tar writes it in ustar, Fits says no", name, n)
					}
					continue
				}
				if terr != nil {
					t.Fatalf("%q, %d bytes, at %d: Fits, archive/tar: %v", name, n, mtime, terr)
				}
				var blk [BlockSize]byte
				tpl.Put(blk[:], n, parts...)
				if !bytes.Equal(blk[:], want) {
					t.Errorf("%q, %d bytes, at %d: the header differs from archive/tar's", name, n, mtime)
				}
				if got, size, ok := Plain(&blk); !ok || got != name || size != n {
					t.Errorf("%q, %d bytes: Plain read %q, %d, %t", name, n, got, size, ok)
				}
			}
		}
	}
	if _, err := NewTemplate(0o644, time.Unix(-1, 0)); err == nil {
		t.Error("a time before 1970 made a template")
	}
}

// TestWithoutDevice: the pack stage's headers, device numbers empty,
// read by archive/tar as the same member, and by Plain.
func TestWithoutDevice(t *testing.T) {
	tpl, err := NewTemplate(0o644, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var blk [BlockSize]byte
	tpl.WithoutDevice().Put(blk[:], 4224, "seq/0/0000000001", ".input_ids.npy")
	if !IsZero(blk[offDevMajor:endDevMinor]) {
		t.Fatalf("device numbers %q", blk[offDevMajor:endDevMinor])
	}
	data := append(blk[:], make([]byte, 4224+2*BlockSize)...)
	h, err := tar.NewReader(bytes.NewReader(data)).Next()
	if err != nil || h.Name != "seq/0/0000000001.input_ids.npy" || h.Size != 4224 || h.Mode != 0o644 || h.Devmajor != 0 {
		t.Fatalf("archive/tar read %+v: %v", h, err)
	}
	if name, size, ok := Plain(&blk); !ok || name != h.Name || size != h.Size {
		t.Fatalf("Plain read %q, %d, %t", name, size, ok)
	}
}

// TestPlainDeclines: what archive/tar reads otherwise, Plain leaves to
// it: a PAX header, a GNU long name, a directory, a bad checksum.
func TestPlainDeclines(t *testing.T) {
	for _, h := range []tar.Header{
		{Typeflag: tar.TypeReg, Name: strings.Repeat("x", 120), Size: 1, Format: tar.FormatPAX},
		{Typeflag: tar.TypeReg, Name: strings.Repeat("y", 120), Size: 1, Format: tar.FormatGNU},
		{Typeflag: tar.TypeDir, Name: "d/", Format: tar.FormatUSTAR},
	} {
		var b bytes.Buffer
		if err := tar.NewWriter(&b).WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if name, _, ok := Plain((*[BlockSize]byte)(b.Bytes())); ok {
			t.Errorf("%q (%v): read %q", h.Name, h.Format, name)
		}
	}
	tpl, _ := NewTemplate(0o644, time.Unix(0, 0))
	var blk [BlockSize]byte
	tpl.Put(blk[:], 3, "a.cls")
	blk[offName] = 'b'
	if _, _, ok := Plain(&blk); ok {
		t.Error("a bad checksum read")
	}
	if _, err := tar.NewReader(bytes.NewReader(blk[:])).Next(); err == nil || err == io.EOF {
		t.Errorf("archive/tar read a bad checksum: %v", err)
	}
}

// TestChecksums: the word-at-a-time sums equal archive/tar's byte-wise ones
// (format.go, computeChecksum) on random blocks, all-0xff blocks and zeros.
func TestChecksums(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	blocks := make([]*[BlockSize]byte, 0, 102)
	var zero, ones [BlockSize]byte
	for i := range ones {
		ones[i] = 0xff
	}
	blocks = append(blocks, &zero, &ones)
	for range 100 {
		var b [BlockSize]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		blocks = append(blocks, &b)
	}
	for n, b := range blocks {
		var wantU, wantS int64
		for i, c := range b {
			if i >= offChksum && i < endChksum {
				c = ' '
			}
			wantU += int64(c)
			wantS += int64(int8(c))
		}
		if u, s := checksums(b); u != wantU || s != wantS {
			t.Errorf("block %d: checksums %d, %d; want %d, %d", n, u, s, wantU, wantS)
		}
	}
}

// FuzzPlain: whatever header block Plain reads, archive/tar reads as a
// regular file with the same name and size, without error. With fix set
// the block's checksum is made valid first, so that the fuzzer explores
// the fields behind it.
func FuzzPlain(f *testing.F) {
	for _, h := range []tar.Header{
		{Name: "train/n01/x.jpg", Size: 1234, Mode: 0o644, Format: tar.FormatUSTAR},
		{Name: strings.Repeat("p/", 60) + "y.cls", Size: 1, Mode: 0o600, Format: tar.FormatUSTAR},
		{Name: "g.jpg", Size: 99, Mode: 0o644, Format: tar.FormatGNU},
		{Name: "u.jpg", Size: 7, Mode: 0o644, Uname: "u", Gname: "g", Format: tar.FormatPAX},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		h.Typeflag = tar.TypeReg
		if err := tw.WriteHeader(&h); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes()[:BlockSize], false)
		f.Add(buf.Bytes()[:BlockSize], true)
	}
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		var blk [BlockSize]byte
		copy(blk[:], b)
		if fix {
			sum, _ := checksums(&blk)
			copy(blk[offChksum:endChksum], fmt.Sprintf("%06o\x00 ", sum))
		}
		name, size, ok := Plain(&blk)
		if !ok {
			return
		}
		h, err := tar.NewReader(bytes.NewReader(blk[:])).Next()
		if err != nil {
			t.Fatalf("Plain read %q, %d bytes; archive/tar: %v", name, size, err)
		}
		if h.Typeflag != tar.TypeReg || h.Name != name || h.Size != size {
			t.Fatalf("Plain read %q, %d bytes; archive/tar type %q, %q, %d bytes", name, size, h.Typeflag, h.Name, h.Size)
		}
	})
}

// TestPutAllocatesNothing: what the resident writer's members cost, and
// the pack stage's.
func TestPutAllocatesNothing(t *testing.T) {
	tpl, _ := NewTemplate(0o644, time.Unix(1700000000, 0))
	var blk [BlockSize]byte
	key, ext := "train/00001/row-000042", "jpg"
	if n := testing.AllocsPerRun(100, func() { tpl.Put(blk[:], 75<<10, key, ".", ext) }); n != 0 {
		t.Fatalf("%v allocations a header", n)
	}
	buf := make([]byte, 2*BlockSize)
	if n := testing.AllocsPerRun(100, func() {
		w := Writer{t: tpl, buf: buf}
		if _, err := w.Member(100, key, ".", ext); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations a Writer's member", n)
	}
}

// archiveTarsMember is the member archive/tar writes in ustar for a
// regular file of mode 0644 named name modified at mtime: its header,
// data and padding.
func archiveTarsMember(name string, data []byte, mtime int64) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: 0o644,
		ModTime: time.Unix(mtime, 0).UTC(), Format: tar.FormatUSTAR}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	err := tw.Flush()
	return b.Bytes(), err
}

// TestWriterIsArchiveTars: a Writer's headers are archive/tar's in ustar
// byte for byte — a name over 100 bytes split into prefix and name where
// archive/tar splits it, at the longest prefix and name — and its
// members, data and padding, too; what archive/tar refuses in ustar (a
// name that does not split, a non-ASCII one, a directory's, a size past
// MaxSize) the Writer refuses. A member past the buffer fails and writes
// nothing.
func TestWriterIsArchiveTars(t *testing.T) {
	names := [][]string{
		{"a", ".", "jpg"}, {""}, {strings.Repeat("k", 100)}, {strings.Repeat("k", 101)},
		{strings.Repeat("p/", 60), ".npy"}, {"seq/0/", strings.Repeat("9", 100)}, {"seq/0/", strings.Repeat("9", 101)},
		{strings.Repeat("d", 155), "/", strings.Repeat("f", 100)}, {strings.Repeat("d", 156), "/", "f"},
		{strings.Repeat("d/", 80), strings.Repeat("f", 20)}, {strings.Repeat("d", 100), "/", strings.Repeat("f", 101)},
		{"/", strings.Repeat("f", 100)}, {"a/", strings.Repeat("b", 100)}, {"a/", strings.Repeat("b", 99), "/"}, {"dir/"}, {strings.Repeat("d/", 70)},
		{"ñandú/", strings.Repeat("x", 100)}, {"ñandú.txt"}, {"nul\x00.bin"}, {strings.Repeat("n/", 50), "nul\x00.bin"},
	}
	sizes := []int64{0, 1, 511, 512, 513, MaxSize, MaxSize + 1}
	for _, mtime := range []int64{0, 1700000000} {
		tpl, err := NewTemplate(0o644, time.Unix(mtime, 0))
		if err != nil {
			t.Fatal(err)
		}
		for _, parts := range names {
			name := strings.Join(parts, "")
			for _, n := range sizes {
				want, terr := archiveTars(t, name, n, mtime)
				var blk [BlockSize]byte
				err := tpl.header(blk[:], n, parts)
				if terr != nil || err != nil {
					if terr == nil || err == nil {
						t.Errorf("%q, %d bytes: %v; archive/tar: %v", name, n, err, terr)
					}
					continue
				}
				if !bytes.Equal(blk[:], want) {
					t.Errorf("%q, %d bytes, at %d: the header differs from archive/tar's", name, n, mtime)
				}
				if n > 513 {
					continue
				}
				data := bytes.Repeat([]byte{'x'}, int(n))
				wantMember, err := archiveTarsMember(name, data, mtime)
				if err != nil {
					t.Fatal(err)
				}
				buf := bytes.Repeat([]byte{0xee}, len(wantMember)) // the padding is the Writer's to clear
				w := NewWriter(buf, tpl)
				room, err := w.Member(int(n), parts...)
				if err != nil {
					t.Fatalf("%q, %d bytes: %v", name, n, err)
				}
				copy(room, data)
				if w.Len() != len(buf) || !bytes.Equal(buf, wantMember) {
					t.Errorf("%q, %d bytes: the member differs from archive/tar's (%d bytes written of %d)", name, n, w.Len(), len(buf))
				}
			}
		}
	}

	tpl, _ := NewTemplate(0o644, time.Unix(0, 0))
	buf := make([]byte, 4*BlockSize)
	w := NewWriter(buf, tpl.WithoutDevice())
	name := strings.Repeat("p/", 60) + "x.npy"
	room, err := w.Member(4, name)
	if err != nil {
		t.Fatal(err)
	}
	copy(room, "abcd")
	h, err := tar.NewReader(bytes.NewReader(buf)).Next()
	if err != nil || h.Name != name || h.Size != 4 || !IsZero(buf[offDevMajor:endDevMinor]) {
		t.Fatalf("a split name without device numbers: archive/tar read %+v, %v", h, err)
	}
	if _, err := w.Member(513, "y"); err == nil || w.Len() != 2*BlockSize || !IsZero(buf[2*BlockSize:]) {
		t.Fatalf("a member past the buffer: %v, %d bytes written", err, w.Len())
	}
	if _, err := w.Member(512, "y"); err != nil || w.Len() != len(buf) {
		t.Fatalf("the last member that fits: %v, %d bytes written", err, w.Len())
	}
}

// TestAppendHeader: archive/tar's header blocks for every format a
// Header may ask, errors alike (a non-ASCII name in USTAR, a NUL, a time
// before 1970 in USTAR), appended to what dst holds; where a Template
// holds the member, Put writes the same block.
func TestAppendHeader(t *testing.T) {
	names := []string{"a.jpg", strings.Repeat("k", 101), strings.Repeat("p/", 60) + ".npy", strings.Repeat("k", 300), "ñandú.txt", "nul\x00.bin", "dir/"}
	times := []time.Time{{}, time.Unix(0, 0), time.Unix(1700000000, 0), time.Unix(1700000000, 5e8), time.Unix(-1, 0), time.Unix(1<<33, 0)}
	for _, name := range names {
		for _, mtime := range times {
			for _, f := range []tar.Format{USTAR, PAX, Any} {
				for _, n := range []int64{0, 513, MaxSize + 1} {
					h := Header{Name: name, Size: n, Mode: 0o600, ModTime: mtime, Format: f}
					var want bytes.Buffer
					terr := tar.NewWriter(&want).WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: n, Mode: 0o600, ModTime: mtime, Format: f})
					got, err := AppendHeader([]byte("before"), h)
					if (err != nil) != (terr != nil) || string(got[:6]) != "before" {
						t.Fatalf("%q at %v in %v: %v; archive/tar: %v", name, mtime, f, err, terr)
					}
					if err != nil {
						if len(got) != 6 {
							t.Errorf("%q at %v in %v: %d bytes appended on failure", name, mtime, f, len(got)-6)
						}
						continue
					}
					if !bytes.Equal(got[6:], want.Bytes()) {
						t.Errorf("%q at %v in %v, %d bytes: differs from archive/tar's", name, mtime, f, n)
					}
					tpl, terr := NewTemplate(0o600, mtime)
					if terr != nil || !Fits(n, name) || mtime.Nanosecond() != 0 || mtime.IsZero() {
						continue
					}
					var blk [BlockSize]byte
					tpl.Put(blk[:], n, name)
					if !bytes.Equal(blk[:], got[6:]) {
						t.Errorf("%q at %v in %v: Put differs from AppendHeader", name, mtime, f)
					}
				}
			}
		}
	}
}
