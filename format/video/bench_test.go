package video

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
	"github.com/brandgw/brand/internal/testsupport/videotest"
)

// BenchmarkIndex indexes 1,000 videos from memory, 16 at once, and
// reports what a file costs: time, reads and bytes read (all metadata:
// top-level box headers and the moov, or moofs). The files: the small
// ones of mp4/testdata (20 frames: moov first, moov last, fragmented), and
// an ffmpeg-written 10 minutes at 30 fps (18,000 frames, moov last).
func BenchmarkIndex(b *testing.B) {
	files := map[string][]byte{}
	for _, name := range []string{"bframes.mp4", "cut.mp4", "fragmented.mp4"} {
		data, err := os.ReadFile(filepath.Join("mp4", "testdata", name))
		if err != nil {
			b.Fatal(err)
		}
		files[name] = data
	}
	long := filepath.Join(b.TempDir(), "long.mp4")
	videotest.Encode(b, long, "64x48", 30, 18000, 0, "-c:v", "libx264", "-preset", "ultrafast", "-g", "30", "-bf", "2")
	data, err := os.ReadFile(long)
	if err != nil {
		b.Fatal(err)
	}
	files["10min-30fps.mp4"] = data
	for _, name := range []string{"bframes.mp4", "cut.mp4", "fragmented.mp4", "10min-30fps.mp4"} {
		b.Run(name, func(b *testing.B) {
			n := 1000
			if name == "10min-30fps.mp4" {
				n = 100
			}
			st := decodetest.NewStore()
			for i := range n {
				st.Objs[fmt.Sprintf("v/%04d.mp4", i)] = files[name]
			}
			objs := st.List()
			var stats *Stats
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if _, stats, err = IndexFiles(context.Background(), st, objs, format.Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/file")
			b.ReportMetric(float64(stats.BytesRead)/float64(n), "B-read/file")
			b.ReportMetric(float64(stats.Reads)/float64(n), "reads/file")
			b.ReportMetric(float64(len(files[name])), "B/file")
		})
	}
}
