package chunkindex

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

func TestSplitKey(t *testing.T) {
	tests := []struct{ name, key, ext string }{
		{"train/n01/x.JPEG", "train/n01/x", "JPEG"},
		{"a/b.c.d", "a/b", "c.d"},
		{"a/b", "a/b", ""},
		{"noext", "noext", ""},
		{"x.jpg", "x", "jpg"},
		{"dir.v2/x.jpg", "dir.v2/x", "jpg"},
		{"dir.v2/x", "dir.v2/x", ""},
		{"a/.hidden", "a/", "hidden"},
		{"a/b.", "a/b", ""},
		{"", "", ""},
	}
	for _, tt := range tests {
		key, ext := SplitKey(tt.name)
		if key != tt.key || ext != tt.ext {
			t.Errorf("SplitKey(%q) = %q, %q; want %q, %q", tt.name, key, ext, tt.key, tt.ext)
		}
	}
}

// scanAll runs ScanTar over b and returns the samples.
func scanAll(t testing.TB, r io.Reader) ([]TarSample, int64, error) {
	t.Helper()
	var got []TarSample
	size, err := ScanTar(r, func(s TarSample) error {
		got = append(got, s)
		return nil
	})
	return got, size, err
}

// checkSamples verifies what ScanTar promises about samples of archive b,
// independently of how ScanTar computed them: ranges are ascending
// block-aligned runs inside b, each CRC is the CRC32C of its range, and the
// ranges concatenated with EndOfArchive form a tar holding exactly the
// samples' members with the same headers and contents as in b.
func checkSamples(t testing.TB, b []byte, samples []TarSample) {
	t.Helper()
	var concat bytes.Buffer
	var wantNames []string
	end := int64(0)
	for _, s := range samples {
		if s.Offset < end || s.Offset%BlockSize != 0 || s.Length <= 0 || s.Length%BlockSize != 0 || s.Offset+s.Length > int64(len(b)) {
			t.Fatalf("sample %q: bad range %d+%d (previous ends at %d, archive %d bytes)", s.Key, s.Offset, s.Length, end, len(b))
		}
		end = s.Offset + s.Length
		r := b[s.Offset:end]
		if got := crc32.Checksum(r, castagnoli); got != s.CRC {
			t.Errorf("sample %q: CRC %#x, range sums to %#x", s.Key, s.CRC, got)
		}
		for _, m := range s.Members {
			if k, _ := SplitKey(m); k != s.Key {
				t.Errorf("sample %q has member %q of key %q", s.Key, m, k)
			}
		}
		concat.Write(r)
		wantNames = append(wantNames, s.Members...)
	}
	concat.Write(EndOfArchive[:])

	orig := readTar(t, bytes.NewReader(b)).lookup()
	got := readTar(t, &concat)
	var gotNames []string
	for _, m := range got {
		gotNames = append(gotNames, m.hdr.Name)
		o, ok := orig[m.hdr.Name]
		if !ok {
			t.Errorf("concatenated tar has %q, which the archive does not", m.hdr.Name)
			continue
		}
		if !bytes.Equal(o.data, m.data) || o.hdr.Size != m.hdr.Size || !o.hdr.ModTime.Equal(m.hdr.ModTime) || o.hdr.Mode != m.hdr.Mode {
			t.Errorf("member %q differs between the archive and the concatenated ranges", m.hdr.Name)
		}
	}
	if !slices.Equal(gotNames, wantNames) {
		t.Errorf("concatenated ranges hold %q, samples list %q", gotNames, wantNames)
	}
}

type tarMember struct {
	hdr  *tar.Header
	data []byte
}

// readTar returns the regular members of a tar in order, also indexed by
// name through the map view of the returned slice.
func readTar(t testing.TB, r io.Reader) tarMembers {
	t.Helper()
	tr := tar.NewReader(r)
	var out tarMembers
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("archive/tar: %v", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("archive/tar reading %q: %v", hdr.Name, err)
		}
		out = append(out, tarMember{hdr, data})
	}
}

type tarMembers []tarMember

func (ms tarMembers) get(name string) (tarMember, bool) {
	for _, m := range ms {
		if m.hdr.Name == name {
			return m, true
		}
	}
	return tarMember{}, false
}

// The map-style access used by checkSamples.
func (ms tarMembers) lookup() map[string]tarMember {
	m := make(map[string]tarMember, len(ms))
	for _, x := range ms {
		m[x.hdr.Name] = x
	}
	return m
}

// TestScanTarFixtures checks ScanTar against tars written by GNU tar and
// Python tarfile, with expectations computed by Python tarfile
// (testdata/gen_tars.py).
func TestScanTarFixtures(t *testing.T) {
	for _, name := range []string{"gnu.tar", "gnu-pax.tar", "python-pax.tar"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			var want []TarSample
			j, err := os.ReadFile(filepath.Join("testdata", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(j, &want); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				w := &want[i]
				w.CRC = crc32.Checksum(b[w.Offset:w.Offset+w.Length], castagnoli)
			}
			readers := map[string]io.Reader{
				"whole":    bytes.NewReader(b),
				"one-byte": iotest.OneByteReader(bytes.NewReader(b)),
				"half":     iotest.HalfReader(bytes.NewReader(b)),
				"data-err": iotest.DataErrReader(bytes.NewReader(b)),
			}
			for rname, r := range readers {
				got, size, err := scanAll(t, r)
				if err != nil {
					t.Fatalf("%s: ScanTar: %v", rname, err)
				}
				if size != int64(len(b)) {
					t.Errorf("%s: size %d, want %d", rname, size, len(b))
				}
				if !equalSamples(got, want) {
					t.Errorf("%s: ScanTar =\n%s\nwant\n%s", rname, fmtSamples(got), fmtSamples(want))
				}
			}
			got, _, _ := scanAll(t, bytes.NewReader(b))
			checkSamples(t, b, got)
		})
	}
}

func equalSamples(a, b []TarSample) bool {
	return slices.EqualFunc(a, b, func(x, y TarSample) bool {
		return x.Key == y.Key && x.Offset == y.Offset && x.Length == y.Length && x.CRC == y.CRC && slices.Equal(x.Members, y.Members)
	})
}

func fmtSamples(ss []TarSample) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "  %q %d+%d crc=%#x %q\n", s.Key, s.Offset, s.Length, s.CRC, s.Members)
	}
	return b.String()
}

// TestScanTarGNU runs the installed GNU tar on a fresh tree, in each format
// it writes, and checks the sample offsets against GNU tar's own block
// numbers (tar -tR), which count from the first header of each member,
// long-name and pax headers included.
func TestScanTarGNU(t *testing.T) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("no tar binary; the committed GNU tar fixtures are still checked by TestScanTarFixtures")
	}
	if out, err := exec.Command(tarBin, "--version").Output(); err != nil || !bytes.Contains(out, []byte("GNU tar")) {
		t.Skip("tar is not GNU tar")
	}
	src := t.TempDir()
	long := strings.Repeat("L", 90) + "/" + strings.Repeat("M", 90)
	files := map[string]int{
		"ds/s0000.jpg": 1, "ds/s0000.cls": 2,
		"ds/s0001.jpg": 513, "ds/s0001.cls": 0, "ds/s0001.meta.json": 511,
		"ds/" + long + "/s0002.jpg": 20000, "ds/" + long + "/s0002.txt": 3,
		"ds/" + strings.Repeat("n", 150) + ".bin": 4096,
		"ds/sub.d/s0003.png":                      77,
	}
	for name, size := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte{byte(size)}, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, format := range []string{"gnu", "pax", "oldgnu", "posix"} {
		t.Run(format, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "x.tar")
			cmd := exec.Command(tarBin, "--sort=name", "--format="+format, "-C", src, "-cf", out, "ds")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %v\n%s", cmd, err, b)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			got, size, err := scanAll(t, bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if size != int64(len(b)) {
				t.Errorf("size %d, want %d", size, len(b))
			}
			if len(got) != 5 {
				t.Errorf("got %d samples, want 5:\n%s", len(got), fmtSamples(got))
			}
			checkSamples(t, b, got)

			// GNU tar numbers a member by its first header block in the gnu
			// formats ('L' long-name blocks included) but by its ustar header
			// in the pax formats, after the 'x' extended header.
			blocks := gnuBlocks(t, tarBin, out)
			for _, s := range got {
				blk, ok := blocks[s.Members[0]]
				if !ok {
					t.Fatalf("tar -tR does not list %q", s.Members[0])
				}
				at := blk * BlockSize
				if at != s.Offset && (at < s.Offset || b[s.Offset+156] != tar.TypeXHeader || format == "gnu" || format == "oldgnu") {
					t.Errorf("sample %q at offset %d; GNU tar puts %q at block %d (offset %d)", s.Key, s.Offset, s.Members[0], blk, at)
				}
			}
		})
	}
}

// gnuBlocks lists member name -> block number of its first header block.
func gnuBlocks(t *testing.T, tarBin, path string) map[string]int64 {
	t.Helper()
	out, err := exec.Command(tarBin, "-tR", "-f", path).Output()
	if err != nil {
		t.Fatalf("tar -tR: %v", err)
	}
	m := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		rest, ok := strings.CutPrefix(line, "block ")
		num, name, ok2 := strings.Cut(rest, ": ")
		if !ok || !ok2 {
			t.Fatalf("unexpected tar -tR line %q", line)
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			t.Fatalf("tar -tR line %q: %v", line, err)
		}
		m[name] = n
	}
	return m
}

// TestScanTarPythonReadsConcat checks that Python's tarfile, the reader
// WebDataset uses, accepts sample ranges served in an arbitrary order.
func TestScanTarPythonReadsConcat(t *testing.T) {
	py := pythontest.Need(t, "")
	b, err := os.ReadFile("testdata/gnu.tar")
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := scanAll(t, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var batch bytes.Buffer
	var want []string
	for _, s := range slices.Backward(got) {
		batch.Write(b[s.Offset : s.Offset+s.Length])
		for _, m := range s.Members {
			o, _ := readTar(t, bytes.NewReader(b)).get(m)
			want = append(want, fmt.Sprintf("%s %d %08x", m, o.hdr.Size, crc32.ChecksumIEEE(o.data)))
		}
	}
	batch.Write(EndOfArchive[:])
	cmd := exec.Command(py, "-c", `
import sys, tarfile, zlib
with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tf:
    for m in tf:
        print(m.name, m.size, "%08x" % zlib.crc32(tf.extractfile(m).read()))
`)
	cmd.Stdin = &batch
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python tarfile: %v", err)
	}
	if g := strings.Split(strings.TrimSpace(string(out)), "\n"); !slices.Equal(g, want) {
		t.Errorf("python tarfile read\n%s\nwant\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
}

// tarOf builds a tar with archive/tar: entries are regular files unless the
// header says otherwise. Without a trailing end marker if open is true.
type entry struct {
	hdr  tar.Header
	data string
}

func tarOf(t testing.TB, close bool, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if h.Mode == 0 && h.Typeflag != tar.TypeXGlobalHeader {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.data); err != nil {
			t.Fatal(err)
		}
	}
	if close {
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
	} else if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func reg(name, data string) entry { return entry{tar.Header{Name: name}, data} }

func TestScanTarSkipsDirectoriesAndGlobalHeaders(t *testing.T) {
	b := tarOf(t, true,
		entry{hdr: tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": strings.Repeat("g", 700)}}},
		entry{hdr: tar.Header{Name: "d/", Typeflag: tar.TypeDir}},
		reg("d/a.jpg", "aaaa"),
		reg("d/a.cls", "1"),
		entry{hdr: tar.Header{Name: "d/e/", Typeflag: tar.TypeDir}},
		reg("d/e/b.jpg", strings.Repeat("b", 1500)),
		entry{hdr: tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "x"}}},
		reg("d/e/c.jpg", ""),
	)
	got, size, err := scanAll(t, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len(b)) {
		t.Errorf("size %d, want %d", size, len(b))
	}
	var keys []string
	for _, s := range got {
		keys = append(keys, s.Key)
	}
	if want := []string{"d/a", "d/e/b", "d/e/c"}; !slices.Equal(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
	checkSamples(t, b, got)
}

func TestScanTarWithoutEndOfArchive(t *testing.T) {
	b := tarOf(t, false, reg("a.jpg", "x"), reg("b.jpg", strings.Repeat("y", 600)))
	got, size, err := scanAll(t, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len(b)) || len(got) != 2 || got[1].Offset+got[1].Length != int64(len(b)) {
		t.Errorf("size %d of %d, samples:\n%s", size, len(b), fmtSamples(got))
	}
	checkSamples(t, b, got)
}

func TestScanTarEmpty(t *testing.T) {
	for name, b := range map[string][]byte{"no bytes": nil, "end marker only": EndOfArchive[:]} {
		got, size, err := scanAll(t, bytes.NewReader(b))
		if err != nil || len(got) != 0 || size != int64(len(b)) {
			t.Errorf("%s: %d samples, size %d, err %v", name, len(got), size, err)
		}
	}
}

func TestScanTarErrors(t *testing.T) {
	good := tarOf(t, true, reg("a.jpg", "aaaa"), reg("b.jpg", strings.Repeat("b", 2000)))
	sparseGNU, err := os.ReadFile("testdata/sparse-gnu.tar")
	if err != nil {
		t.Fatal(err)
	}
	sparsePAX, err := os.ReadFile("testdata/sparse-pax.tar")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		tar     []byte
		is      error  // sentinel the error must wrap, if any
		contain string // text the error must contain
	}{
		{"symlink", tarOf(t, true, reg("a.jpg", "x"), entry{hdr: tar.Header{Name: "b.jpg", Typeflag: tar.TypeSymlink, Linkname: "a.jpg"}}),
			ErrUnsupportedMember, `"b.jpg" at offset 1024: type symbolic link`},
		{"hard link", tarOf(t, true, reg("a.jpg", "x"), entry{hdr: tar.Header{Name: "b.jpg", Typeflag: tar.TypeLink, Linkname: "a.jpg"}}),
			ErrUnsupportedMember, "hard link"},
		{"fifo", tarOf(t, true, entry{hdr: tar.Header{Name: "p", Typeflag: tar.TypeFifo}}), ErrUnsupportedMember, "FIFO"},
		{"hidden file", tarOf(t, true, reg("d/.DS_Store", "x")), ErrUnsupportedMember, "starts with '.'"},
		{"old GNU sparse", sparseGNU, ErrUnsupportedMember, "GNU sparse file"},
		{"pax sparse", sparsePAX, ErrUnsupportedMember, "sparse file"},
		{"key reappears", tarOf(t, true, reg("a.jpg", "x"), reg("b.jpg", "y"), reg("a.cls", "z")),
			ErrDuplicateKey, `"a": member "a.cls" at offset 2048 is not adjacent to the sample at offset 0`},
		{"sample split by directory", tarOf(t, true, reg("a.jpg", "x"), entry{hdr: tar.Header{Name: "d/", Typeflag: tar.TypeDir}}, reg("a.cls", "z")),
			ErrDuplicateKey, "not adjacent"},
		{"member twice", tarOf(t, true, reg("a.jpg", "x"), reg("a.jpg", "y")), ErrDuplicateKey, `member "a.jpg" at offset 1024 appears twice`},
		{"truncated in data", good[:len(good)-1024-100], io.ErrUnexpectedEOF, ""},
		{"truncated in header", good[:1024+200], io.ErrUnexpectedEOF, "offset 1024"},
		{"garbage header", append(slices.Clone(good[:1024]), bytes.Repeat([]byte{'x'}, 512)...), tar.ErrHeader, "offset 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := scanAll(t, bytes.NewReader(tt.tar))
			if err == nil {
				t.Fatal("ScanTar succeeded")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q does not wrap %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.contain) {
				t.Errorf("error %q does not contain %q", err, tt.contain)
			}
		})
	}
}

func TestScanTarCallbackError(t *testing.T) {
	b := tarOf(t, true, reg("a.jpg", "x"), reg("b.jpg", "y"), reg("c.jpg", "z"))
	stop := errors.New("stop")
	var n int
	_, err := ScanTar(bytes.NewReader(b), func(TarSample) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if err != stop || n != 2 {
		t.Errorf("err %v after %d calls; want the callback's error, unwrapped, after 2", err, n)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestScanTarReadError(t *testing.T) {
	b := tarOf(t, true, reg("a.jpg", strings.Repeat("x", 5000)))
	boom := errors.New("boom")
	_, err := ScanTar(io.MultiReader(bytes.NewReader(b[:2048]), errReader{boom}), func(TarSample) error { return nil })
	if !errors.Is(err, boom) {
		t.Errorf("err %v, want it to wrap the reader's error", err)
	}
}

// FuzzScanTar checks that ScanTar never panics and that whatever it accepts
// satisfies checkSamples: ranges are where the members are and concatenate
// to a valid tar.
func FuzzScanTar(f *testing.F) {
	for _, name := range []string{"gnu.tar", "python-pax.tar", "sparse-gnu.tar"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(tarOf(f, true, reg("a.jpg", "x"), reg("a.cls", "1"), entry{hdr: tar.Header{Name: "d/", Typeflag: tar.TypeDir}}, reg("d/b.jpg", strings.Repeat("y", 600))))
	f.Add(tarOf(f, false, reg(strings.Repeat("n", 150)+".jpg", "long")))
	f.Add(tarOf(f, true, entry{hdr: tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "c"}}}, reg("a.jpg", "x")))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, size, err := scanAll(t, bytes.NewReader(b))
		if err != nil {
			return
		}
		if size != int64(len(b)) {
			t.Fatalf("size %d, input %d bytes", size, len(b))
		}
		checkSamples(t, b, got)
	})
}
