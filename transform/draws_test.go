package transform

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

var update = flag.Bool("update", false, "rewrite testdata/draws.json from the Go implementation")

const goldenPath = "testdata/draws.json"

// golden is testdata/draws.json: the draws of docs/transform.md pinned
// forever, checked by TestGolden here and by python/tests/test_transform.py
// against the Python reference.
type golden struct {
	Log   []mathCase  `json:"log"`
	Exp   []mathCase  `json:"exp"`
	Crops []cropCase  `json:"crops"`
	Flips []flipCase  `json:"flips"`
	Train []trainCase `json:"imagenet_train"`
	Keys  []keyCase   `json:"sample_keys"`
}

// keyCase is one sample's key in a job (SampleKey): the job's seed, the
// dataset's name, the epoch and the sample's ID, and the key's seed.
type keyCase struct {
	JobSeed uint64 `json:"job_seed"`
	Dataset string `json:"dataset"`
	Epoch   uint64 `json:"epoch"`
	Sample  uint64 `json:"sample"`
	KeySeed uint64 `json:"key_seed"`
	// Train is the imagenet-train draws of the key on a 500×375 image.
	Box  [4]int `json:"box"`
	Flip bool   `json:"flip"`
}

type mathCase struct {
	X    float64 `json:"x"`
	Bits string  `json:"bits"` // the result's IEEE-754 bits, hex
}

type cropCase struct {
	Seed     uint64     `json:"seed"`
	Epoch    uint64     `json:"epoch"`
	Sample   uint64     `json:"sample"`
	Op       int        `json:"op"`
	Width    int        `json:"width"`
	Height   int        `json:"height"`
	Scale    [2]float64 `json:"scale"`
	Ratio    [2]float64 `json:"ratio"`
	Box      [4]int     `json:"box"` // x, y, w, h
	Attempts int        `json:"attempts"`
}

type flipCase struct {
	Seed   uint64  `json:"seed"`
	Epoch  uint64  `json:"epoch"`
	Sample uint64  `json:"sample"`
	Op     int     `json:"op"`
	P      float64 `json:"p"`
	Flip   bool    `json:"flip"`
}

type trainCase struct {
	Seed   uint64 `json:"seed"`
	Epoch  uint64 `json:"epoch"`
	Sample uint64 `json:"sample"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Box    [4]int `json:"box"`
	Flip   bool   `json:"flip"`
}

func bitsOf(f float64) string { return fmt.Sprintf("%#016x", math.Float64bits(f)) }

func (c *cropCase) compute() {
	s := Key{c.Seed, c.Epoch, c.Sample}.stream(c.Op)
	b, n := randomResizedCropBox(&s, c.Width, c.Height, c.Scale, c.Ratio)
	c.Box, c.Attempts = [4]int{b.X, b.Y, b.W, b.H}, n
}

func (c *flipCase) compute() {
	s := Key{c.Seed, c.Epoch, c.Sample}.stream(c.Op)
	c.Flip = flipDraw(&s, c.P)
}

// compute runs the built-in pipeline's plan, so the golden vectors pin the
// draws as a pipeline makes them, operator positions included.
func (c *trainCase) compute(p *Pipeline) {
	pl := p.makePlan(c.Width, c.Height, Key{c.Seed, c.Epoch, c.Sample})
	b := pl.crops[0].Box
	c.Box, c.Flip = [4]int{b.X, b.Y, b.W, b.H}, pl.flips[0]
}

// goldenInputs are the cases: ImageNet-like sizes, extreme aspect ratios
// that reach the fallback, narrow and wide ranges, large seeds.
func goldenInputs() golden {
	var g golden
	for _, x := range []float64{0.75, 4.0 / 3.0, 1, 0.5, 2, 0.001, 1000, 0.9999, 1.0625, 0.9375, 3.0 / 5.0} {
		g.Log = append(g.Log, mathCase{X: x})
	}
	for _, x := range []float64{0, 0.0625, -0.0625, 0.1, -0.2876820724517809, 0.28768207245178085, 1, -1, 6.9, -6.9, 20} {
		g.Exp = append(g.Exp, mathCase{X: x})
	}
	std := [2][2]float64{{0.08, 1}, {3.0 / 4.0, 4.0 / 3.0}}
	sizes := [][2]int{{500, 375}, {375, 500}, {333, 500}, {1, 1}, {224, 224}, {1000, 10}, {10, 1000}, {4000, 3000}, {2, 3}}
	seeds := []uint64{0, 7, math.MaxUint64}
	for i, sz := range sizes {
		for j, seed := range seeds {
			g.Crops = append(g.Crops, cropCase{Seed: seed, Epoch: uint64(i), Sample: uint64(j * 1000003), Op: 0,
				Width: sz[0], Height: sz[1], Scale: std[0], Ratio: std[1]})
		}
	}
	// Other ranges and operator positions: a narrow scale that often
	// fails to fit, a wide ratio, a fixed aspect.
	for i, r := range [][2][2]float64{
		{{0.9, 1}, {0.5, 2}}, {{0.25, 0.25}, {1, 1}}, {{0.08, 1}, {0.1, 10}}, {{1, 1}, {3.0 / 4.0, 4.0 / 3.0}},
	} {
		for k, sz := range [][2]int{{500, 375}, {640, 100}} {
			g.Crops = append(g.Crops, cropCase{Seed: 42, Epoch: 3, Sample: uint64(100 + i*2 + k), Op: i + 1,
				Width: sz[0], Height: sz[1], Scale: r[0], Ratio: r[1]})
		}
	}
	for i := range 12 {
		g.Flips = append(g.Flips, flipCase{Seed: 7, Epoch: uint64(i / 4), Sample: uint64(i), Op: 1, P: 0.5})
	}
	g.Flips = append(g.Flips,
		flipCase{Seed: 1, Epoch: 0, Sample: 0, Op: 0, P: 0},
		flipCase{Seed: 1, Epoch: 0, Sample: 0, Op: 0, P: 1},
		flipCase{Seed: math.MaxUint64, Epoch: math.MaxUint64, Sample: math.MaxUint64, Op: 31, P: 0.25})
	for i := range 16 {
		g.Train = append(g.Train, trainCase{Seed: 7, Epoch: uint64(i / 8), Sample: uint64(i * 37), Width: 300 + 13*i, Height: 500 - 11*i})
	}
	// Keys: two datasets of one job (a mixture's components), a name in
	// UTF-8 beyond ASCII, the extreme seeds.
	for _, c := range []keyCase{
		{JobSeed: 7, Dataset: "imagenet"}, {JobSeed: 7, Dataset: "imagenet", Sample: 1}, {JobSeed: 7, Dataset: "imagenet", Epoch: 1},
		{JobSeed: 7, Dataset: "web"}, {JobSeed: 7, Dataset: "code"}, {JobSeed: 8, Dataset: "web"},
		{JobSeed: 0, Dataset: "t"}, {JobSeed: math.MaxUint64, Dataset: "données-é", Epoch: math.MaxUint64, Sample: math.MaxUint64},
		{JobSeed: 42, Dataset: "test", Epoch: 3, Sample: 1234567},
	} {
		g.Keys = append(g.Keys, c)
	}
	return g
}

func computeGolden(t *testing.T, g golden) golden {
	t.Helper()
	train, err := New(ImagenetTrain, Builtins()[ImagenetTrain], Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range g.Log {
		g.Log[i].Bits = bitsOf(detLog(g.Log[i].X))
	}
	for i := range g.Exp {
		g.Exp[i].Bits = bitsOf(detExp(g.Exp[i].X))
	}
	for i := range g.Crops {
		g.Crops[i].compute()
	}
	for i := range g.Flips {
		g.Flips[i].compute()
	}
	for i := range g.Train {
		g.Train[i].compute(train)
	}
	for i := range g.Keys {
		g.Keys[i].compute(train)
	}
	return g
}

func (c *keyCase) compute(p *Pipeline) {
	k := SampleKey(c.JobSeed, c.Dataset, c.Epoch, c.Sample)
	if k.Epoch != c.Epoch || k.Sample != c.Sample {
		panic(fmt.Sprintf("SampleKey changed the epoch or sample: %+v", k))
	}
	c.KeySeed = k.Seed
	pl := p.makePlan(500, 375, k)
	b := pl.crops[0].Box
	c.Box, c.Flip = [4]int{b.X, b.Y, b.W, b.H}, pl.flips[0]
}

// TestGolden requires the Go draws to reproduce testdata/draws.json
// exactly. A change here changes every transformed epoch ever served: it
// must not happen (docs/transform.md, "Stability").
func TestGolden(t *testing.T) {
	got := computeGolden(t, goldenInputs())
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.WriteFile(goldenPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var w golden
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	// Recompute from the file's inputs, so that the file, not this
	// test's list, is what is pinned.
	again := computeGolden(t, w)
	b2, _ := json.MarshalIndent(again, "", "  ")
	if !bytes.Equal(append(b2, '\n'), want) {
		t.Errorf("the draws differ from %s (rerun with -update only for a deliberate, documented change)", goldenPath)
		for i := range w.Crops {
			if again.Crops[i] != w.Crops[i] {
				t.Logf("crop %d: got %+v", i, again.Crops[i])
			}
		}
	}
	// The golden file reaches the fallback, the first attempt and later
	// ones, and flips both ways: otherwise it would pin too little.
	seen := map[int]bool{}
	for _, c := range w.Crops {
		seen[min(c.Attempts, 3)] = true
	}
	flips := map[bool]bool{}
	for _, f := range w.Flips {
		flips[f.Flip] = true
	}
	if !seen[1] || !seen[2] && !seen[3] || !seen[3] || !flips[true] || !flips[false] {
		t.Errorf("golden cases reach attempts %v and flips %v; want first, later and fallback, both flips", seen, flips)
	}
}

// TestDetMath: the deterministic log and exp are within a few ulps of the
// true functions over the ranges the draws use, and exact where they must
// be.
func TestDetMath(t *testing.T) {
	if detLog(1) != 0 || detExp(0) != 1 {
		t.Errorf("detLog(1) = %v, detExp(0) = %v", detLog(1), detExp(0))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		x := math.Exp(r.Float64()*14 - 7) // 0.0009 to 1100
		if e := math.Abs(detLog(x)-math.Log(x)) / math.Max(math.Abs(math.Log(x)), 1e-300); e > 1e-13 && math.Abs(detLog(x)-math.Log(x)) > 1e-15 {
			t.Fatalf("detLog(%v) = %v, math.Log %v", x, detLog(x), math.Log(x))
		}
		y := r.Float64()*14 - 7
		if e := math.Abs(detExp(y)-math.Exp(y)) / math.Exp(y); e > 1e-13 {
			t.Fatalf("detExp(%v) = %v, math.Exp %v (relative %g)", y, detExp(y), math.Exp(y), e)
		}
	}
}

// TestCropDistribution: over many samples the boxes fit, their areas
// cover the scale range, and their aspect ratios stay in range; flips
// come up about half the time. Deterministic (seeded), not a timing test.
func TestCropDistribution(t *testing.T) {
	const n = 20000
	flipped, fallback := 0, 0
	var minA, maxA = 1.0, 0.0
	for i := range uint64(n) {
		s := Key{Seed: 9, Epoch: 1, Sample: i}.stream(0)
		b, attempts := randomResizedCropBox(&s, 500, 375, [2]float64{0.08, 1}, [2]float64{0.75, 4.0 / 3.0})
		if !b.inside(500, 375) || b.W < 1 || b.H < 1 {
			t.Fatalf("sample %d: box %+v outside 500×375", i, b)
		}
		if attempts > cropAttempts {
			fallback++
			continue
		}
		a := float64(b.W*b.H) / (500 * 375)
		minA, maxA = min(minA, a), max(maxA, a)
		if ar := float64(b.W) / float64(b.H); ar < 0.74 || ar > 1.35 {
			t.Fatalf("sample %d: aspect %v out of range", i, ar)
		}
		f := Key{Seed: 9, Epoch: 1, Sample: i}.stream(1)
		if flipDraw(&f, 0.5) {
			flipped++
		}
	}
	if minA > 0.085 || maxA < 0.95 || fallback > n/1000 {
		t.Errorf("areas %.3f–%.3f, %d fallbacks of %d", minA, maxA, fallback, n)
	}
	if flipped < n*45/100 || flipped > n*55/100 {
		t.Errorf("%d flips in %d", flipped, n)
	}
}

// TestPythonReference runs python/brand/transform.py, written from
// docs/transform.md alone, on the golden inputs and 500 random ones, and
// requires it to agree with Go on every draw.
func TestPythonReference(t *testing.T) {
	python := pythontest.Need(t, "")
	g := goldenInputs()
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 500 {
		lo := 0.01 + r.Float64()*0.9
		rlo := 0.2 + r.Float64()
		g.Crops = append(g.Crops, cropCase{Seed: r.Uint64(), Epoch: r.Uint64N(1000), Sample: r.Uint64(), Op: r.IntN(MaxOps),
			Width: 1 + r.IntN(3000), Height: 1 + r.IntN(3000), Scale: [2]float64{lo, lo + r.Float64()*(1-lo)},
			Ratio: [2]float64{rlo, rlo * (1 + r.Float64()*3)}})
		g.Flips = append(g.Flips, flipCase{Seed: r.Uint64(), Epoch: r.Uint64(), Sample: r.Uint64(), Op: i % MaxOps, P: r.Float64()})
		g.Log = append(g.Log, mathCase{X: math.Exp(r.Float64()*14 - 7)})
		g.Exp = append(g.Exp, mathCase{X: r.Float64()*14 - 7})
		if i%5 == 0 {
			g.Keys = append(g.Keys, keyCase{JobSeed: r.Uint64(), Dataset: fmt.Sprintf("ds-%x", r.Uint64()), Epoch: r.Uint64N(100), Sample: r.Uint64N(1 << 40)})
		}
	}
	want := computeGolden(t, g)
	in, _ := json.Marshal(g)
	path := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(path, in, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "testdata/reference_driver.py", path)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join("..", "python"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference_driver.py: %v\n%s", err, stderr.String())
	}
	var got golden
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Crops) != len(want.Crops) || len(got.Flips) != len(want.Flips) || len(got.Log) != len(want.Log) || len(got.Exp) != len(want.Exp) || len(got.Train) != len(want.Train) || len(got.Keys) != len(want.Keys) {
		t.Fatalf("reference answered %d/%d/%d/%d/%d/%d cases", len(got.Crops), len(got.Flips), len(got.Log), len(got.Exp), len(got.Train), len(got.Keys))
	}
	for i := range want.Keys {
		if got.Keys[i] != want.Keys[i] {
			t.Errorf("sample key %d: Python %+v, Go %+v", i, got.Keys[i], want.Keys[i])
		}
	}
	for i := range want.Crops {
		if got.Crops[i] != want.Crops[i] {
			t.Errorf("crop %d: Python %+v, Go %+v", i, got.Crops[i], want.Crops[i])
		}
	}
	for i := range want.Flips {
		if got.Flips[i] != want.Flips[i] {
			t.Errorf("flip %d: Python %+v, Go %+v", i, got.Flips[i], want.Flips[i])
		}
	}
	for i := range want.Log {
		if got.Log[i] != want.Log[i] {
			t.Errorf("log %d: Python %+v, Go %+v", i, got.Log[i], want.Log[i])
		}
	}
	for i := range want.Exp {
		if got.Exp[i] != want.Exp[i] {
			t.Errorf("exp %d: Python %+v, Go %+v", i, got.Exp[i], want.Exp[i])
		}
	}
	for i := range want.Train {
		if got.Train[i] != want.Train[i] {
			t.Errorf("imagenet-train %d: Python %+v, Go %+v", i, got.Train[i], want.Train[i])
		}
	}
}
