package chunkindex

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// archiveTarChunk is the chunk a tar.Writer writes for samples with the
// header ChunkWriter gives each member (mode 0644 and the epoch for
// none, the time rounded to the second, archive/tar's choice of format):
// the reference, as ChunkWriter wrote through archive/tar before
// internal/codec/ustar.
func archiveTarChunk(t *testing.T, samples []testSample) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, s := range samples {
		for _, m := range s.members {
			mode, mtime := m.Mode, m.ModTime
			if mode == 0 {
				mode = 0o644
			}
			if mtime.IsZero() {
				mtime = time.Unix(0, 0)
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: m.Name, Size: m.Size, Mode: mode, ModTime: mtime.Round(time.Second)}); err != nil {
				t.Fatal(err)
			}
			if m.Body != nil {
				if _, err := io.Copy(tw, m.Body); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestChunkWriterIsArchiveTars: a chunk is byte for byte the tar
// archive/tar writes for the same members — ustar names, names split
// into ustar's prefix, PAX for long and non-ASCII ones and for a time
// past ustar's, empty members, several blocks, modes and times of their
// own.
func TestChunkWriterIsArchiveTars(t *testing.T) {
	samples := func() []testSample {
		split := strings.Repeat("s/", 60) + "x" // over 100 bytes, split at its last '/'
		return append(testSamples(), testSample{split, []Member{mem(split+".jpg", "split"), {Name: split + ".cls", Size: 1, Mode: 0o600,
			ModTime: time.Unix(1<<34, 0), Body: strings.NewReader("7")}}})
	}
	got, _ := writeChunk(t, samples())
	if want := archiveTarChunk(t, samples()); !bytes.Equal(got, want) {
		t.Fatalf("the chunk differs from archive/tar's: %d bytes against %d", len(got), len(want))
	}
}
