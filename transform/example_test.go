package transform_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/brandgw/brand/transform"
)

// A server builds its pipelines once, looks up the one a job names, and
// each worker applies it with its own Scratch and a pooled output buffer.
func Example() {
	set, err := transform.NewSet(transform.Config{}, transform.Options{})
	if err != nil {
		panic(err)
	}
	if _, err := set.Get("imagenet"); err != nil {
		what, _, _ := strings.Cut(err.Error(), ";") // then the names there are (imagenet-train-gpu too with brand_turbojpeg)
		fmt.Println(what)                           // what a client's 400 says
	}
	p, _ := set.Get(transform.ImagenetTrain)
	jpeg, _ := os.ReadFile("testdata/photo.jpg")
	name, _ := transform.OutputName("n01/img_13.jpg")

	var sc transform.Scratch // one per worker
	var buf []byte           // pooled by the caller
	var meter transform.Meter
	res, err := p.Apply(buf[:0], jpeg, transform.Key{Seed: 7, Epoch: 0, Sample: 13}, &sc)
	meter.Add(res, err)
	fmt.Println(name, res.Shape, len(res.Out), meter.Stats().Images)
	// Output:
	// transform: unknown pipeline "imagenet"
	// n01/img_13.npy [3 224 224] 150656 1
}
