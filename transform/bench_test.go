//go:build unix

package transform

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// The decoder comparison of docs/transform.md §7. Run as
//
//	go test -run '^$' -bench . -benchtime 2000x -count 5 ./transform/ -args -figures /tmp/figures.jsonl
//	go test -tags brand_turbojpeg -run '^$' -bench . -benchtime 2000x -count 5 ./transform/ -args -figures /tmp/figures.jsonl
//
// Every benchmark runs on one goroutine over the same 2,000 photo-like
// JPEGs (internal/gen/photos, seed 1; made once into -photos) and reports
// cpu-ms/img: the process's CPU time (user + system, getrusage, GC
// included) per image. BenchmarkPillow runs Pillow (Debian's
// python3-pil, libjpeg-turbo) over the same files in a Python process
// that times itself with time.process_time; its ns/op is that CPU per
// image. With -figures each result is appended as a JSON line.
var (
	benchPhotos  = flag.String("photos", "", "directory of the benchmark JPEGs (default: a directory under the system's temporary directory, made once)")
	benchN       = flag.Int("photos.n", 2000, "number of benchmark JPEGs")
	benchFigures = flag.String("figures", "", "append each benchmark's figures to this file as JSON lines")
)

// benchSet returns the benchmark's JPEGs and the directory they are in,
// writing them on first use.
func benchSet(b *testing.B) ([][]byte, string) {
	b.Helper()
	dir := *benchPhotos
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("brand-photos-1-%d", *benchN))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	set := make([][]byte, *benchN)
	for i := range set {
		path := filepath.Join(dir, fmt.Sprintf("photo_%05d.jpg", i))
		data, err := os.ReadFile(path)
		if err != nil {
			p, err := photos.One(1, i)
			if err != nil {
				b.Fatal(err)
			}
			data = p.JPEG
			if err := os.WriteFile(path, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		set[i] = data
	}
	return set, dir
}

func processCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// figure reports CPU per image and appends the figures to -figures.
func figure(b *testing.B, images int, cpu, wall time.Duration, extra map[string]any) {
	b.Helper()
	perImage := cpu.Seconds() * 1e3 / float64(images)
	b.ReportMetric(perImage, "cpu-ms/img")
	if *benchFigures == "" {
		return
	}
	rec := map[string]any{"name": b.Name(), "images": images, "cpu_ms_per_image": perImage,
		"wall_ms_per_image": wall.Seconds() * 1e3 / float64(images)}
	for k, v := range extra {
		rec[k] = v
	}
	line, _ := json.Marshal(rec)
	f, err := os.OpenFile(*benchFigures, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDecode: a JPEG to full-size RGB, per decoder; image-jpeg is
// image/jpeg alone (to YCbCr planes, no upsampling or colour conversion),
// the figure issue 34 quoted.
func BenchmarkDecode(b *testing.B) {
	set, _ := benchSet(b)
	b.Run("image-jpeg", func(b *testing.B) {
		b.ResetTimer()
		c0, t0 := processCPU(b), time.Now()
		for i := range b.N {
			if _, err := jpeg.Decode(bytes.NewReader(set[i%len(set)])); err != nil {
				b.Fatal(err)
			}
		}
		figure(b, b.N, processCPU(b)-c0, time.Since(t0), nil)
	})
	for _, dec := range decoders() {
		b.Run(dec.Name(), func(b *testing.B) {
			var buf []byte
			b.ResetTimer()
			c0, t0 := processCPU(b), time.Now()
			for i := range b.N {
				data := set[i%len(set)]
				h, err := readHeader(data, DefaultMaxPixels, IgnoreEXIF)
				if err != nil {
					b.Fatal(err)
				}
				reg, _, err := dec.DecodeJPEG(buf, data, h, 1, Rect{W: h.w, H: h.h})
				if err != nil {
					b.Fatal(err)
				}
				buf = reg.Image.pix
			}
			figure(b, b.N, processCPU(b)-c0, time.Since(t0), nil)
		})
	}
}

// BenchmarkPipeline: the built-in pipelines end to end (header, plan,
// decode, resample, flip, .npy), per decoder, with and without
// reduced-size decoding where the decoder has it.
func BenchmarkPipeline(b *testing.B) {
	set, _ := benchSet(b)
	for _, name := range []string{ImagenetTrain, ImagenetEval} {
		for _, dec := range decoders() {
			for _, reduced := range []bool{false, true} {
				if reduced && dec.Name() == "go" {
					continue // image/jpeg cannot decode at reduced size
				}
				label := name + "/" + dec.Name()
				if reduced {
					label += "-reduced"
				}
				b.Run(label, func(b *testing.B) {
					spec := Builtins()[name]
					spec.ReducedDecode = &reduced
					p, err := New(name, spec, Options{JPEG: dec})
					if err != nil {
						b.Fatal(err)
					}
					var sc Scratch
					var out []byte
					scaled := 0
					b.ResetTimer()
					c0, t0 := processCPU(b), time.Now()
					for i := range b.N {
						res, err := p.Apply(out[:0], set[i%len(set)], Key{Seed: 7, Sample: uint64(i)}, &sc)
						if err != nil {
							b.Fatal(err)
						}
						out = res.Out
						if res.Denom > 1 {
							scaled++
						}
					}
					figure(b, b.N, processCPU(b)-c0, time.Since(t0), map[string]any{"reduced_decodes": scaled})
				})
			}
		}
	}
}

// BenchmarkPillow: Pillow on the same JPEGs, in a Python process timing
// its own CPU. Its ns/op is Pillow's CPU per image.
func BenchmarkPillow(b *testing.B) {
	python := pythontest.Need(b, "scripts/ensure-pil.sh", "PIL")
	set, dir := benchSet(b)
	for _, op := range []string{"decode", "train", "train-draft", "eval"} {
		b.Run(op, func(b *testing.B) {
			n := min(b.N, len(set))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, python, "testdata/pil_reference.py", "bench", dir, op, fmt.Sprint(n), "1")
			cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join("..", "python"))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				b.Fatal(err)
			}
			var rec struct {
				Images int     `json:"images"`
				CPU    float64 `json:"cpu_s"`
			}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
					b.Fatal(err)
				}
			}
			if rec.Images == 0 {
				b.Fatalf("pil_reference.py printed %q", out)
			}
			cpu := time.Duration(rec.CPU * float64(time.Second))
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(rec.Images), "ns/op")
			figure(b, rec.Images, cpu, cpu, nil)
		})
	}
}

// BenchmarkResample: the typical imagenet-train resample alone, a 400×350
// crop to 224×224.
func BenchmarkResample(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	src := image8{w: 400, h: 350, pix: make([]byte, 400*350*3)}
	for i := range src.pix {
		src.pix[i] = byte(r.IntN(256))
	}
	job := resampleJob{inW: 400, inH: 350, x1: 400, y1: 350, outW: 224, outH: 224, win: Rect{W: 224, H: 224}}
	var dst, tmp []byte
	b.ResetTimer()
	c0, t0 := processCPU(b), time.Now()
	for range b.N {
		var out image8
		out, tmp = resample(dst, tmp, src, job)
		dst = out.pix
	}
	figure(b, b.N, processCPU(b)-c0, time.Since(t0), nil)
}
