package bench

import (
	"archive/tar"
	"bytes"
	"testing"
)

// TestVisionShardIsArchiveTars: a generated shard is byte for byte the
// tar archive/tar writes for its samples' members (mode 0644, no owner,
// no time, its choice of format), as shard wrote them through a
// tar.Writer before internal/codec/ustar.
func TestVisionShardIsArchiveTars(t *testing.T) {
	set := visionSet{Samples: 12, Shards: 2, MinSide: 32, MaxSide: 64, Seed: 7}
	for k := range set.Shards {
		got, _, err := set.shard(k)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		tw := tar.NewWriter(&want)
		lo, hi := set.shardSamples(k)
		for i := lo; i < hi; i++ {
			s, err := set.sample(i)
			if err != nil {
				t.Fatal(err)
			}
			for j, ext := range s.Exts {
				if err := tw.WriteHeader(&tar.Header{Name: s.Key + "." + ext, Mode: 0o644, Size: int64(len(s.Data[j])), Typeflag: tar.TypeReg}); err != nil {
					t.Fatal(err)
				}
				if _, err := tw.Write(s.Data[j]); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("shard %d: %d bytes, not archive/tar's %d", k, len(got), want.Len())
		}
	}
}
