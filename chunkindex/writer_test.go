package chunkindex

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

type testSample struct {
	key     string
	members []Member
}

func mem(name, body string) Member {
	return Member{Name: name, Size: int64(len(body)), Body: strings.NewReader(body)}
}

// testSamples covers ustar names, names that need pax (too long for the
// ustar prefix/name split, non-ASCII), empty members, multi-block bodies
// and explicit modes and times.
func testSamples() []testSample {
	long := "train/" + strings.Repeat("p", 120) + "/" + strings.Repeat("q", 120)
	return []testSample{
		{"train/a", []Member{mem("train/a.jpg", "jpeg bytes"), mem("train/a.cls", "3")}},
		{"train/b", []Member{mem("train/b.jpg", strings.Repeat("b", 10000)), mem("train/b.meta.json", `{"k":1}`), mem("train/b.txt", "")}},
		{long, []Member{mem(long+".jpg", "long"), mem(long+".cls", "4")}},
		{"train/caf\u00e9", []Member{mem("train/caf\u00e9.jpg", "non-ascii")}},
		{"train/" + strings.Repeat("r", 140), []Member{mem("train/"+strings.Repeat("r", 140)+".bin", strings.Repeat("r", 512))}},
		{"d/e", []Member{{Name: "d/e.bin", Size: 0, Mode: 0o600, ModTime: time.Unix(1700000000, 600_000_000)}}},
	}
}

// writeChunk writes samples with a ChunkWriter and returns the chunk and the
// ranges WriteSample reported.
func writeChunk(t testing.TB, samples []testSample) ([]byte, []TarSample) {
	t.Helper()
	var buf bytes.Buffer
	w := NewChunkWriter(&buf)
	var got []TarSample
	for _, s := range samples {
		off, n, crc, err := w.WriteSample(s.key, s.members)
		if err != nil {
			t.Fatalf("WriteSample(%q): %v", s.key, err)
		}
		if w.Size() != off+n {
			t.Errorf("Size() = %d after sample %q at %d+%d", w.Size(), s.key, off, n)
		}
		var names []string
		for _, m := range s.members {
			names = append(names, m.Name)
		}
		got = append(got, TarSample{Key: s.key, Offset: off, Length: n, CRC: crc, Members: names})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Size() != int64(buf.Len()) {
		t.Errorf("Size() = %d after Close, wrote %d", w.Size(), buf.Len())
	}
	return buf.Bytes(), got
}

func TestChunkWriterRoundTrip(t *testing.T) {
	b, written := writeChunk(t, testSamples())
	scanned, size, err := scanAll(t, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len(b)) {
		t.Errorf("ScanTar size %d, chunk is %d bytes", size, len(b))
	}
	if !equalSamples(written, scanned) {
		t.Errorf("WriteSample reported\n%s\nScanTar found\n%s", fmtSamples(written), fmtSamples(scanned))
	}
	checkSamples(t, b, scanned)

	// Contents and metadata survive.
	members := readTar(t, bytes.NewReader(b)).lookup()
	for _, s := range testSamples() {
		for _, m := range s.members {
			got, ok := members[m.Name]
			if !ok {
				t.Fatalf("member %q missing", m.Name)
			}
			var want []byte
			if m.Body != nil {
				want, _ = io.ReadAll(m.Body)
			}
			if !bytes.Equal(got.data, want) {
				t.Errorf("member %q: contents differ", m.Name)
			}
			wantMode, wantTime := m.Mode, m.ModTime.Round(time.Second)
			if wantMode == 0 {
				wantMode = 0o644
			}
			if m.ModTime.IsZero() {
				wantTime = time.Unix(0, 0)
			}
			h := got.hdr
			if h.Mode != wantMode || !h.ModTime.Equal(wantTime) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
				t.Errorf("member %q: mode %o time %v uid %d gid %d uname %q gname %q", m.Name, h.Mode, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
			}
		}
	}
}

func TestChunkWriterReproducible(t *testing.T) {
	a, _ := writeChunk(t, testSamples())
	b, _ := writeChunk(t, testSamples())
	if !bytes.Equal(a, b) {
		t.Error("the same samples produced different chunks")
	}
}

func TestChunkWriterRejects(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		members []Member
		is      error
		contain string
	}{
		{"empty key", "", []Member{mem("a.jpg", "x")}, nil, "empty sample key"},
		{"no members", "a", nil, nil, "no members"},
		{"key mismatch", "a", []Member{mem("a.jpg", "x"), mem("b.cls", "y")}, nil, `member "b.cls": name has key "b"`},
		{"directory in name", "a", []Member{mem("x/a.jpg", "x")}, nil, `name has key "x/a"`},
		{"hidden", "d/", []Member{mem("d/.jpg", "x")}, nil, "starts with '.'"},
		{"trailing slash", "d/", []Member{mem("d/", "")}, nil, "ends in '/'"},
		{"repeated member", "a", []Member{mem("a.jpg", "x"), mem("a.jpg", "y")}, nil, "appears twice"},
		{"negative size", "a", []Member{{Name: "a.jpg", Size: -1, Body: strings.NewReader("")}}, nil, "negative size"},
		{"nil body", "a", []Member{{Name: "a.jpg", Size: 3}}, nil, "nil body"},
		{"already written", "w", []Member{mem("w.png", "x")}, ErrDuplicateKey, `"w": already written`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewChunkWriter(&buf)
			if _, _, _, err := w.WriteSample("w", []Member{mem("w.jpg", "first")}); err != nil {
				t.Fatal(err)
			}
			before := buf.Len()
			_, _, _, err := w.WriteSample(tt.key, tt.members)
			if err == nil {
				t.Fatal("WriteSample succeeded")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q does not wrap %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.contain) {
				t.Errorf("error %q does not contain %q", err, tt.contain)
			}
			if buf.Len() != before {
				t.Errorf("a rejected sample wrote %d bytes", buf.Len()-before)
			}
			// The chunk is intact: later samples and Close still work.
			if _, _, _, err := w.WriteSample("z", []Member{mem("z.jpg", "ok")}); err != nil {
				t.Errorf("WriteSample after a rejected sample: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, _, err := scanAll(t, bytes.NewReader(buf.Bytes()))
			if err != nil || len(got) != 2 {
				t.Errorf("chunk after a rejected sample: %d samples, %v", len(got), err)
			}
		})
	}
}

type failWriter struct {
	n   int // bytes accepted before failing
	err error
}

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n := f.n
		f.n = 0
		return n, f.err
	}
	f.n -= len(p)
	return len(p), nil
}

func TestChunkWriterStickyErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		w       io.Writer
		member  Member
		is      error
		contain string
	}{
		{"short body", io.Discard, Member{Name: "a.jpg", Size: 10, Body: strings.NewReader("12345")}, io.ErrUnexpectedEOF, "after 5 of 10 bytes"},
		{"long body", io.Discard, Member{Name: "a.jpg", Size: 2, Body: strings.NewReader("12345")}, nil, "longer than size 2"},
		{"body error", io.Discard, Member{Name: "a.jpg", Size: 10, Body: iotest.ErrReader(boom)}, boom, `member "a.jpg"`},
		{"writer error", &failWriter{n: 100, err: boom}, mem("a.jpg", "x"), boom, `sample "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewChunkWriter(tt.w)
			_, _, _, err := w.WriteSample("a", []Member{tt.member})
			if err == nil {
				t.Fatal("WriteSample succeeded")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q does not wrap %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.contain) {
				t.Errorf("error %q does not contain %q", err, tt.contain)
			}
			if _, _, _, err2 := w.WriteSample("b", []Member{mem("b.jpg", "x")}); err2 != err {
				t.Errorf("next WriteSample: %v, want the sticky %v", err2, err)
			}
			if err2 := w.Close(); err2 != err {
				t.Errorf("Close: %v, want the sticky %v", err2, err)
			}
		})
	}
}

func TestChunkWriterClosed(t *testing.T) {
	var buf bytes.Buffer
	w := NewChunkWriter(&buf)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), EndOfArchive[:]) {
		t.Errorf("an empty chunk is %d bytes, want the end-of-archive marker", buf.Len())
	}
	if _, _, _, err := w.WriteSample("a", []Member{mem("a.jpg", "x")}); !errors.Is(err, ErrWriterClosed) {
		t.Errorf("WriteSample after Close: %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrWriterClosed) {
		t.Errorf("second Close: %v", err)
	}
}
