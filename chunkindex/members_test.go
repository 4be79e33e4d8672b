package chunkindex

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
	"time"
)

// TestScanTarFiles: each member ScanTar describes is, sliced out of the
// chunk, the member archive/tar reads, with its name, time and CRC32C —
// for GNU, pax and Python-written fixtures, however the stream is read.
func TestScanTarFiles(t *testing.T) {
	for _, name := range []string{"gnu.tar", "gnu-pax.tar", "python-pax.tar"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		type file struct {
			name string
			body []byte
			mod  time.Time
		}
		var want []file
		tr := tar.NewReader(bytes.NewReader(b))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				body, _ := io.ReadAll(tr)
				want = append(want, file{h.Name, body, h.ModTime})
			}
		}
		for _, r := range []io.Reader{bytes.NewReader(b), iotest.OneByteReader(bytes.NewReader(b)), iotest.HalfReader(bytes.NewReader(b))} {
			i := 0
			if _, err := ScanTar(r, func(s TarSample) error {
				if len(s.Files) != len(s.Members) {
					return fmt.Errorf("%s: %d files for %d members", s.Key, len(s.Files), len(s.Members))
				}
				for _, f := range s.Files {
					w := want[i]
					i++
					data := b[s.Offset+f.DataOffset : s.Offset+f.DataOffset+f.Size]
					if objectName(s.Key, f.Ext) != w.name || !bytes.Equal(data, w.body) || !f.ModTime.Equal(w.mod.Truncate(time.Second)) ||
						f.CRC != crc32.Checksum(w.body, castagnoli) {
						return fmt.Errorf("%s: %+v does not describe %s", name, f, w.name)
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if i != len(want) {
				t.Fatalf("%s: %d files described, %d in the archive", name, i, len(want))
			}
		}
	}
}

func objectName(key, ext string) string {
	if ext == "" {
		return key
	}
	return key + "." + ext
}

// membersFixture writes a chunk with ChunkWriter and returns its index
// and the files the writer reported.
func membersFixture(t testing.TB) (*Index, [][]MemberInfo, []byte) {
	t.Helper()
	var buf bytes.Buffer
	w := NewChunkWriter(&buf)
	var samples []Sample
	var files [][]MemberInfo
	for i := range 5 {
		key := fmt.Sprintf("d/s%d", i)
		ms := []Member{{Name: key + ".cls", Size: 1, Body: bytes.NewReader([]byte{byte('0' + i)})},
			{Name: key + ".jpg", Size: int64(700 * i), Body: bytes.NewReader(bytes.Repeat([]byte{byte(i)}, 700*i)), ModTime: time.Unix(1700000000+int64(i), 0)}}
		if i == 3 {
			ms = append(ms, Member{Name: key, Size: 3, Body: bytes.NewReader([]byte("raw"))})
		}
		off, n, crc, fs, err := w.WriteSampleFiles(key, ms)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, Sample{Key: key, Chunk: 0, Offset: off, Length: n, CRC: crc})
		files = append(files, fs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ix, err := New([]Chunk{{Key: "c0.tar", Size: int64(buf.Len()), ETag: "e", Samples: 5}}, samples)
	if err != nil {
		t.Fatal(err)
	}
	return ix, files, buf.Bytes()
}

// TestMembersRoundTrip: the writer's and the scanner's descriptions agree,
// encode, decode to the same members, and re-encode to the same bytes.
func TestMembersRoundTrip(t *testing.T) {
	ctx := context.Background()
	ix, files, chunk := membersFixture(t)
	i := 0
	if _, err := ScanTar(bytes.NewReader(chunk), func(s TarSample) error {
		if fmt.Sprint(s.Files) != fmt.Sprint(files[i]) {
			return fmt.Errorf("sample %d: scanner %+v, writer %+v", i, s.Files, files[i])
		}
		i++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var b MembersBuilder
	for id, fs := range files {
		if err := b.Add(id, fs); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := b.Encode(ctx, ix)
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeMembers(ctx, enc, ix)
	if err != nil {
		t.Fatal(err)
	}
	if m.IndexID() != ix.ID() || m.Len() != 11 || m.NumSamples() != 5 || fmt.Sprint(m.Extensions()) != "[cls jpg ]" {
		t.Fatalf("decoded: %s %d %d %v", m.IndexID(), m.Len(), m.NumSamples(), m.Extensions())
	}
	for id, fs := range files {
		for j, f := range fs {
			if got := m.Member(id, j); got != f {
				t.Fatalf("sample %d member %d: %+v, want %+v", id, j, got, f)
			}
			if k, ok := m.Find(id, f.Ext); !ok || k != j {
				t.Fatalf("Find(%d, %q) = %d %v", id, f.Ext, k, ok)
			}
		}
	}
	if _, ok := m.Find(0, "png"); ok {
		t.Fatal("found a member that is not there")
	}
	var b2 MembersBuilder
	for id := range m.NumSamples() {
		var fs []MemberInfo
		for j := range m.Count(id) {
			fs = append(fs, m.Member(id, j))
		}
		_ = b2.Add(id, fs)
	}
	if enc2, err := b2.Encode(ctx, ix); err != nil || !bytes.Equal(enc, enc2) {
		t.Fatalf("re-encoding differs (%v)", err)
	}
	// Every truncation is refused, without panicking.
	for n := range len(enc) {
		if _, err := DecodeMembers(ctx, enc[:n], ix); !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated at %d: %v", n, err)
		}
	}
}

// TestMembersRejects: each rule of docs/format.md §5.3.
func TestMembersRejects(t *testing.T) {
	ctx := context.Background()
	ix, files, _ := membersFixture(t)
	var b MembersBuilder
	for id, fs := range files {
		_ = b.Add(id, fs)
	}
	good, err := b.Encode(ctx, ix)
	if err != nil {
		t.Fatal(err)
	}
	var ob bytes.Buffer
	w := NewChunkWriter(&ob)
	off, n, crc, _ := w.WriteSample("x", []Member{{Name: "x.a", Size: 1, Body: bytes.NewReader([]byte("a"))}})
	_ = w.Close()
	small, _ := New([]Chunk{{Key: "c", Size: int64(ob.Len()), Samples: 1}}, []Sample{{Key: "x", Offset: off, Length: n, CRC: crc}})
	reseal := func(b []byte) []byte {
		le.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
		return b
	}
	recOff := membersHeaderLen + int(le.Uint32(good[44:])) + 2*5
	tests := []struct {
		name string
		b    func() []byte
		ix   *Index
		want error
	}{
		{"magic", func() []byte { b := bytes.Clone(good); b[0] = 'X'; return b }, ix, ErrCorrupt},
		{"version", func() []byte { b := bytes.Clone(good); le.PutUint32(b[8:], 2); return reseal(b) }, ix, ErrVersion},
		{"flags", func() []byte { b := bytes.Clone(good); le.PutUint32(b[12:], 1); return reseal(b) }, ix, ErrVersion},
		{"checksum", func() []byte { b := bytes.Clone(good); b[len(b)-5] ^= 1; return b }, ix, ErrCorrupt},
		{"trailing bytes", func() []byte { return append(bytes.Clone(good), 0) }, ix, ErrCorrupt},
		{"another index", func() []byte { return bytes.Clone(good) }, small, ErrCorrupt},
		{"data outside the range", func() []byte {
			b := bytes.Clone(good)
			le.PutUint32(b[recOff+4:], 1<<20)
			return reseal(b)
		}, ix, ErrCorrupt},
		{"data off a block", func() []byte {
			b := bytes.Clone(good)
			le.PutUint32(b[recOff+4:], 513)
			return reseal(b)
		}, ix, ErrCorrupt},
		{"extension out of the table", func() []byte {
			b := bytes.Clone(good)
			le.PutUint32(b[recOff:], 9)
			return reseal(b)
		}, ix, ErrCorrupt},
		{"extension twice in a sample", func() []byte {
			b := bytes.Clone(good)
			le.PutUint32(b[recOff+memberRecordLen:], 0)
			return reseal(b)
		}, ix, ErrCorrupt},
		{"a sample without members", func() []byte {
			b := bytes.Clone(good)
			le.PutUint16(b[membersHeaderLen+int(le.Uint32(good[44:])):], 0)
			return reseal(b)
		}, ix, ErrCorrupt},
	}
	for _, tc := range tests {
		if _, err := DecodeMembers(ctx, tc.b(), tc.ix); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := b.Add(9, files[0]); err == nil {
		t.Error("Add out of order accepted")
	}
}

func FuzzDecodeMembers(f *testing.F) {
	ix, files, _ := membersFixture(f)
	var b MembersBuilder
	for id, fs := range files {
		_ = b.Add(id, fs)
	}
	good, err := b.Encode(context.Background(), ix)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:60])
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeMembers(context.Background(), data, ix)
		if err == nil {
			for id := range m.NumSamples() {
				for j := range m.Count(id) {
					_ = m.Member(id, j)
				}
			}
		}
	})
}
