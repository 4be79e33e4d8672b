package mp4

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGolden pins what Index finds in the small ffmpeg-written files of
// testdata (testdata/README.md), so that a change to it shows as a diff
// even where ffmpeg is not installed.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.mp4")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/*.mp4: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Index(context.Background(), Bytes(b), int64(len(b)), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(f, "", "\t")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := strings.TrimSuffix(path, ".mp4") + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the index of %s differs from %s (go test -run TestGolden -update rewrites it):\n%s", path, golden, got)
			}
		})
	}
}
