package dataset

import (
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/internal/testsupport/videotest"
)

// A tree of videos is indexed with a CRC32C per GOP by default (and with
// --checksums): each chunk's spans are exactly its GOPs' ranges — cut
// where one GOP's bytes end and the next's begin, another track's bytes
// between them left out — each the CRC32C of those bytes of the file,
// and they survive the index's encoding. The files stay pinned by their
// identity (size and modification time), not a content ETag of their
// ends. Refused (NoChecksums, --checksums=false) the index is what it was
// before: no spans, no checksums flag, which a gateway serves checking
// the identity alone.
func TestVideoIndexGOPChecksums(t *testing.T) {
	made := videotest.Make(t, t.TempDir(), "h264-audio.mp4", "h264-opengop.mp4")
	for _, name := range []string{"h264-audio.mp4", "h264-opengop.mp4"} {
		if made[name] == "" {
			t.Fatalf("ffmpeg made no %s", name)
		}
	}
	for _, tt := range []struct {
		name string
		opts InPlaceOptions
		want bool // checksummed
	}{
		{"default", InPlaceOptions{}, true},
		{"checksums", InPlaceOptions{Checksums: true}, true},
		{"checksums refused", InPlaceOptions{NoChecksums: true}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := newLocal(t)
			files := map[string][]byte{}
			for _, name := range []string{"h264-audio.mp4", "h264-opengop.mp4"} {
				b, err := os.ReadFile(made[name])
				if err != nil {
					t.Fatal(err)
				}
				files["a/"+name] = b
			}
			putAll(t, st, files)
			for key := range files {
				setMtime(t, st, key, time.Now().Add(-time.Hour))
			}
			tt.opts.Formats = []format.Format{video.Format{}}
			tt.opts.Options = format.Options{ChunkBytes: 4 << 10} // several GOPs a chunk, several chunks a file
			res, err := IndexInPlace(context.Background(), st, st, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			b, err := res.Index.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			for _, ix := range []*chunkindex.Index{res.Index, decodeIndex(t, b)} {
				if ix.Checksummed() != tt.want {
					t.Fatalf("checksummed: %t", ix.Checksummed())
				}
				several := false
				for c := range ix.NumChunks() {
					ch := ix.Chunk(c)
					key, _, _ := cutChunkKey(ch.Key)
					fi, err := os.Stat(filepath.Join(st.Dir(), key))
					if err != nil {
						t.Fatal(err)
					}
					if identity := fmt.Sprintf("%x-%x", fi.Size(), fi.ModTime().UnixNano()); ch.ETag != identity {
						t.Fatalf("chunk %s is recorded with ETag %q, want the file's identity %q", ch.Key, ch.ETag, identity)
					}
					spans := ix.Spans(c)
					if !tt.want {
						if spans != nil {
							t.Fatalf("chunk %s has %d spans without checksums", ch.Key, len(spans))
						}
						continue
					}
					want := gopSpans(t, files[key], ch.Key)
					several = several || len(want) > 1
					if !slices.Equal(spans, want) {
						t.Fatalf("chunk %s: spans %v, want its GOPs' %v", ch.Key, spans, want)
					}
				}
				if tt.want && !several {
					t.Fatal("no chunk holds several GOPs: the test does not see the spans cut at GOPs")
				}
			}
		})
	}
}

// cutChunkKey splits a video chunk's key (x.mp4#g3-5) into its file and
// its first and last GOPs.
func cutChunkKey(key string) (file string, first, last int) {
	i := len(key) - 1
	for key[i] != '#' {
		i--
	}
	fmt.Sscanf(key[i+1:], "g%d-%d", &first, &last)
	return key[:i], first, last
}

// gopSpans are the spans chunk key's GOPs of the file b should have: each
// GOP's ranges, with the CRC32C of their bytes.
func gopSpans(t *testing.T, b []byte, key string) []chunkindex.Span {
	t.Helper()
	_, first, last := cutChunkKey(key)
	f, err := mp4.Index(context.Background(), mp4.Bytes(b), int64(len(b)), mp4.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var out []chunkindex.Span
	for g := first; g <= last; g++ {
		for _, r := range f.Video.GOPs[g].Ranges {
			out = append(out, chunkindex.Span{Off: r.Off, Len: r.Len, CRC: crc32.Checksum(b[r.Off:r.End()], castagnoli)})
		}
	}
	return out
}

func decodeIndex(t *testing.T, b []byte) *chunkindex.Index {
	t.Helper()
	ix, err := chunkindex.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}
