package photos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sync/errgroup"
)

// Tree is a class-folder tree of small photos, the dataset `brand demo`
// packs and serves: Samples photos in Classes folders, each JPEG with a
// .cls label file beside it, as ImageNet's train folder is laid out and
// WebDataset groups members (n00000003/img_00000013.jpg and .cls). The
// photos are smaller than ImageNet's (each side drawn between MaxSide/2
// and MaxSide), so that thousands are made in seconds, and photo-like
// (the package doc), so that a pipeline such as imagenet-train decodes,
// crops and resizes them as it would real ones.
type Tree struct {
	Samples int
	Classes int // class folders; 0 means 10
	MaxSide int // the longest a side may be, in pixels; 0 means DefaultMaxSide
	Seed    uint64
}

// DefaultMaxSide is Tree's default MaxSide: photos of 160 to 320 pixels a
// side, about 25 KiB each, made in about 5 ms of CPU each.
const DefaultMaxSide = 320

// minSide is the smallest MaxSide a Tree takes: the renderer's grid and
// texture need a few pixels.
const minSide = 8

func (tr Tree) classes() int {
	if tr.Classes <= 0 {
		return 10
	}
	return tr.Classes
}

func (tr Tree) maxSide() int {
	if tr.MaxSide <= 0 {
		return DefaultMaxSide
	}
	return tr.MaxSide
}

// Key is sample i's WebDataset key: its class folder and name.
func (tr Tree) Key(i int) string {
	return fmt.Sprintf("n%08d/img_%08d", tr.Class(i), i)
}

// Class is sample i's class.
func (tr Tree) Class(i int) int { return i % tr.classes() }

// Photo returns sample i's JPEG; the same tree and i always give the same
// bytes.
func (tr Tree) Photo(i int) (Photo, error) {
	side := tr.maxSide()
	if side < minSide {
		return Photo{}, fmt.Errorf("photos: MaxSide %d is below %d pixels", side, minSide)
	}
	r := rand.New(rand.NewPCG(tr.Seed, uint64(i)))
	w, h := side/2+r.IntN(side-side/2+1), side/2+r.IntN(side-side/2+1)
	q := 75 + r.IntN(21)
	return encode(r, i, w, h, q)
}

// Write writes the tree under dir (dir/n00000003/img_00000013.jpg and
// .cls beside it), making the photos on as many goroutines as the process
// has processors.
func (tr Tree) Write(ctx context.Context, dir string) error {
	if tr.Samples <= 0 {
		return fmt.Errorf("photos: need a positive number of samples, got %d", tr.Samples)
	}
	if tr.maxSide() < minSide {
		return fmt.Errorf("photos: MaxSide %d is below %d pixels", tr.maxSide(), minSide)
	}
	for c := range tr.classes() {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("n%08d", c)), 0o755); err != nil {
			return fmt.Errorf("photos: %w", err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range tr.Samples {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			p, err := tr.Photo(i)
			if err != nil {
				return err
			}
			base := filepath.Join(dir, filepath.FromSlash(tr.Key(i)))
			if err := os.WriteFile(base+".jpg", p.JPEG, 0o644); err != nil {
				return fmt.Errorf("photos: %w", err)
			}
			if err := os.WriteFile(base+".cls", []byte(strconv.Itoa(tr.Class(i))), 0o644); err != nil {
				return fmt.Errorf("photos: %w", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}
