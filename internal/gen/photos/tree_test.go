package photos

import (
	"bytes"
	"context"
	"image/jpeg"
	"os"
	"path/filepath"
	"testing"
)

// TestTree: the tree's files are where its keys say, every photo decodes
// at a size within [MaxSide/2, MaxSide], labels are the classes, and the
// bytes are a function of the tree and the index alone.
func TestTree(t *testing.T) {
	tests := []struct {
		name string
		tree Tree
		min  int
		max  int
	}{
		{"default sides", Tree{Samples: 12, Classes: 3, Seed: 1}, DefaultMaxSide / 2, DefaultMaxSide},
		{"small", Tree{Samples: 30, MaxSide: 48, Seed: 2}, 24, 48},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tt.tree.Write(context.Background(), dir); err != nil {
				t.Fatal(err)
			}
			for i := range tt.tree.Samples {
				base := filepath.Join(dir, filepath.FromSlash(tt.tree.Key(i)))
				b, err := os.ReadFile(base + ".jpg")
				if err != nil {
					t.Fatal(err)
				}
				cfg, err := jpeg.DecodeConfig(bytes.NewReader(b))
				if err != nil || cfg.Width < tt.min || cfg.Width > tt.max || cfg.Height < tt.min || cfg.Height > tt.max {
					t.Fatalf("sample %d: %+v %v, want sides in [%d, %d]", i, cfg, err, tt.min, tt.max)
				}
				p, err := tt.tree.Photo(i)
				if err != nil || !bytes.Equal(p.JPEG, b) {
					t.Fatalf("sample %d: Photo gives other bytes than the file (%v)", i, err)
				}
				if _, err := jpeg.Decode(bytes.NewReader(b)); err != nil {
					t.Fatalf("sample %d: %v", i, err)
				}
				cls, err := os.ReadFile(base + ".cls")
				if err != nil || string(cls) != string(rune('0'+tt.tree.Class(i))) {
					t.Fatalf("sample %d: label %q %v, want class %d", i, cls, err, tt.tree.Class(i))
				}
			}
		})
	}
	if _, err := (Tree{Samples: 1, MaxSide: 4}).Photo(0); err == nil {
		t.Error("a MaxSide of 4 pixels was accepted")
	}
	if err := (Tree{}).Write(context.Background(), t.TempDir()); err == nil {
		t.Error("a tree of no samples was written")
	}
	a, _ := Tree{Samples: 2, Seed: 5}.Photo(1)
	b, _ := Tree{Samples: 2, Seed: 6}.Photo(1)
	if bytes.Equal(a.JPEG, b.JPEG) {
		t.Error("two seeds gave the same photo")
	}
}
