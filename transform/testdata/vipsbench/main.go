// Command vipsbench measures libvips through govips on the decoder
// benchmark's JPEGs, for the comparison in docs/transform.md §7. It is a
// module of its own under testdata (so the go tool leaves it out of
// Brand's build, and Brand's go.mod does not carry govips), run by hand:
//
//	apt-get install libvips-dev
//	cd transform/testdata/vipsbench && go run . -photos /tmp/brand-photos-1-2000
//
// It prints one JSON line per operation and repetition: the process's
// CPU time (user + system, getrusage: libvips' own threads included) per
// image, with libvips' operation cache off and one worker thread. decode
// decodes to RGB pixels; train crops a box drawn as torchvision's
// RandomResizedCrop(224) draws it, resizes it to 224×224 with a linear
// kernel and flips half the images, as BenchmarkPillow/train does.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/davidbyttow/govips/v2/vips"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// box is torchvision's RandomResizedCrop.get_params (scale 0.08–1, ratio
// 3/4–4/3) with math/rand: the cost of a crop, not Brand's draws.
func box(r *rand.Rand, w, h int) (int, int, int, int) {
	area := float64(w * h)
	for range 10 {
		t := area * (0.08 + 0.92*r.Float64())
		a := math.Exp(math.Log(0.75) + (math.Log(4.0/3)-math.Log(0.75))*r.Float64())
		cw, ch := int(math.Round(math.Sqrt(t*a))), int(math.Round(math.Sqrt(t/a)))
		if cw > 0 && cw <= w && ch > 0 && ch <= h {
			return r.IntN(w - cw + 1), r.IntN(h - ch + 1), cw, ch
		}
	}
	return 0, 0, w, h
}

func main() {
	dir := flag.String("photos", "/tmp/brand-photos-1-2000", "directory of the benchmark JPEGs")
	reps := flag.Int("reps", 3, "repetitions")
	flag.Parse()
	vips.LoggingSettings(nil, vips.LogLevelError)
	vips.Startup(&vips.Config{ConcurrencyLevel: 1, MaxCacheFiles: 0, MaxCacheMem: 0, MaxCacheSize: 0})
	defer vips.Shutdown()
	names, err := filepath.Glob(filepath.Join(*dir, "*.jpg"))
	if err != nil || len(names) == 0 {
		log.Fatalf("no JPEGs in %s: %v", *dir, err)
	}
	sort.Strings(names)
	var blobs [][]byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			log.Fatal(err)
		}
		blobs = append(blobs, b)
	}
	for rep := range *reps {
		for _, op := range []string{"decode", "train"} {
			r := rand.New(rand.NewPCG(7, uint64(rep)))
			c0 := cpu()
			for _, b := range blobs {
				img, err := vips.NewImageFromBuffer(b)
				if err != nil {
					log.Fatal(err)
				}
				if op == "train" {
					x, y, w, h := box(r, img.Width(), img.Height())
					if err := img.ExtractArea(x, y, w, h); err != nil {
						log.Fatal(err)
					}
					if err := img.ResizeWithVScale(224/float64(w), 224/float64(h), vips.KernelLinear); err != nil {
						log.Fatal(err)
					}
					if r.IntN(2) == 0 {
						if err := img.Flip(vips.DirectionHorizontal); err != nil {
							log.Fatal(err)
						}
					}
				}
				if _, err := img.ToBytes(); err != nil {
					log.Fatal(err)
				}
				img.Close()
			}
			per := (cpu() - c0).Seconds() * 1e3 / float64(len(blobs))
			line, _ := json.Marshal(map[string]any{"name": "vips/" + op, "images": len(blobs), "cpu_ms_per_image": per})
			fmt.Println(string(line))
		}
	}
}
