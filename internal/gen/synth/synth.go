// Package synth generates synthetic image-classification datasets for the
// demo, the benchmarks and tests: class folders of "images" with a realistic
// spread of sizes, each with a .cls label file, as WebDataset expects.
//
// The bytes are pseudo-random (incompressible, like JPEG) and fully
// determined by the seed, so a test can regenerate any file to compare.
package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// Spec describes a synthetic dataset.
type Spec struct {
	Samples   int   // number of samples
	MeanBytes int64 // mean image size; sizes are log-normal around it
	Classes   int   // class folders; default 10
	Seed      uint64
}

// Sample is one generated sample.
type Sample struct {
	Key   string // class/name, the WebDataset key
	Class int
	Image []byte // the ".jpg" member
}

// Label returns the ".cls" member: the class number as text.
func (s Sample) Label() []byte { return []byte(strconv.Itoa(s.Class)) }

func (sp Spec) classes() int {
	if sp.Classes <= 0 {
		return 10
	}
	return sp.Classes
}

// Size returns the image size of sample i: log-normal with sigma 0.5,
// scaled to the requested mean and clamped to [MeanBytes/8, MeanBytes*8].
func (sp Spec) Size(i int) int64 {
	r := rand.New(rand.NewPCG(sp.Seed, uint64(i)<<1|1))
	const sigma = 0.5
	f := math.Exp(r.NormFloat64()*sigma - sigma*sigma/2) // mean 1
	n := int64(float64(sp.MeanBytes) * f)
	return min(max(n, max(sp.MeanBytes/8, 1)), sp.MeanBytes*8)
}

// Sample returns sample i; the same spec and i always give the same bytes.
func (sp Spec) Sample(i int) Sample {
	class := i % sp.classes()
	img := make([]byte, sp.Size(i))
	r := rand.New(rand.NewPCG(sp.Seed^0x9e3779b97f4a7c15, uint64(i)))
	for j := 0; j < len(img); j += 8 {
		v := r.Uint64()
		for k := 0; k < 8 && j+k < len(img); k++ {
			img[j+k] = byte(v >> (8 * k))
		}
	}
	return Sample{Key: fmt.Sprintf("n%08d/img_%08d", class, i), Class: class, Image: img}
}

// TotalBytes returns the sum of image and label sizes, before tar overhead.
func (sp Spec) TotalBytes() int64 {
	var n int64
	for i := range sp.Samples {
		n += sp.Size(i) + int64(len(strconv.Itoa(i%sp.classes())))
	}
	return n
}

// WriteTree writes the dataset as a class-folder tree under dir:
// dir/n00000003/img_00000013.jpg and .cls beside it.
func (sp Spec) WriteTree(dir string) error {
	if sp.Samples <= 0 || sp.MeanBytes <= 0 {
		return fmt.Errorf("synth: need positive Samples and MeanBytes, got %d and %d", sp.Samples, sp.MeanBytes)
	}
	for c := range sp.classes() {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("n%08d", c)), 0o755); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	for i := range sp.Samples {
		s := sp.Sample(i)
		if err := os.WriteFile(filepath.Join(dir, s.Key+".jpg"), s.Image, 0o644); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, s.Key+".cls"), s.Label(), 0o644); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	return nil
}
