package shuffle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	referencePath = "testdata/reference.py"
	docPath       = "../docs/shuffle.md"
	driverMarker  = "# ---- test driver ----"
)

// referenceOutput is what testdata/reference.py prints for the golden inputs.
type referenceOutput struct {
	Cases []struct {
		Name         string    `json:"name"`
		ChunkOrder   []int     `json:"chunk_order"`
		WindowStarts []int     `json:"window_starts"`
		Order        []int     `json:"order"`
		NumBatches   int       `json:"num_batches"`
		Batches      [][][]int `json:"batches"`
	} `json:"cases"`
	Streams []struct {
		Seed1   uint64   `json:"seed1"`
		Seed2   uint64   `json:"seed2"`
		Outputs []uint64 `json:"outputs"`
	} `json:"streams"`
	Bounded []struct {
		Values []uint64 `json:"values"`
	} `json:"bounded"`
	Stratified []goldenStratified `json:"stratified"` // outputs and name only
}

// runReference runs testdata/reference.py on the inputs in the JSON file
// path and decodes what it prints into out.
func runReference(t *testing.T, path string, out any) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed; the Go golden vectors still ran in TestGolden")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, referencePath, path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", referencePath, path, err, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("decoding %s output: %v", referencePath, err)
	}
}

// TestPythonReference runs the independent Python implementation of the
// specification on the golden inputs and requires it to agree with Go on
// every output, so that docs/shuffle.md is proven reimplementable.
func TestPythonReference(t *testing.T) {
	var ref referenceOutput
	runReference(t, goldenPath, &ref)

	golden := readGolden(t)
	if len(ref.Cases) != len(golden.Cases) || len(ref.Streams) != len(golden.Streams) || len(ref.Bounded) != len(golden.Bounded) || len(ref.Stratified) != len(golden.Stratified) {
		t.Fatalf("reference printed %d cases, %d streams, %d bounded, %d stratified; golden has %d, %d, %d, %d",
			len(ref.Cases), len(ref.Streams), len(ref.Bounded), len(ref.Stratified),
			len(golden.Cases), len(golden.Streams), len(golden.Bounded), len(golden.Stratified))
	}
	for i, in := range golden.Stratified {
		in.ChunkOrder, in.WindowStarts, in.Order = nil, nil, nil
		compareStratified(t, ref.Stratified[i], computeStratified(t, in))
	}
	for i, in := range golden.Cases {
		in.ChunkOrder, in.WindowStarts, in.Order, in.NumBatches, in.Batches = nil, nil, nil, 0, nil
		g := computeCase(t, in)
		r := ref.Cases[i]
		compareCase(t, goldenCase{
			Name:         r.Name,
			ChunkOrder:   r.ChunkOrder,
			WindowStarts: r.WindowStarts,
			Order:        r.Order,
			NumBatches:   r.NumBatches,
			Batches:      r.Batches,
		}, g)
	}
	for i, st := range golden.Streams {
		seed1, seed2 := streamSeeds(st.Seed, st.Epoch, st.Domain, st.Index)
		s := newStream(st.Seed, st.Epoch, st.Domain, st.Index)
		outputs := make([]uint64, len(st.Outputs))
		for j := range outputs {
			outputs[j] = s.Uint64()
		}
		r := ref.Streams[i]
		if r.Seed1 != seed1 || r.Seed2 != seed2 || !reflect.DeepEqual(r.Outputs, outputs) {
			t.Errorf("stream %d: python seeds %#x %#x outputs %#x; go %#x %#x %#x", i, r.Seed1, r.Seed2, r.Outputs, seed1, seed2, outputs)
		}
	}
	for i, bd := range golden.Bounded {
		var s stream
		s.Seed(bd.Seed1, bd.Seed2)
		values := make([]uint64, len(bd.N))
		for j, n := range bd.N {
			values[j] = s.Bounded(n)
		}
		if r := ref.Bounded[i]; !reflect.DeepEqual(r.Values, values) {
			t.Errorf("bounded %d: python %v, go %v", i, r.Values, values)
		}
	}
}

// TestPythonReferenceStratified compares the stratified order of Go and of
// the Python reference on random epochs: skewed and empty strata, one
// stratum, empty chunks.
func TestPythonReferenceStratified(t *testing.T) {
	var in struct {
		Stratified []goldenStratified `json:"stratified"`
	}
	for i, s := range randomStratShapes(150) {
		in.Stratified = append(in.Stratified, goldenStratified{
			Name: fmt.Sprintf("random-%d", i), Counts: s.counts, Strata: s.strata,
			NumStrata: s.numStrata, Seed: s.seed, Epoch: s.epoch, Window: s.window,
		})
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stratified.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var ref referenceOutput
	runReference(t, path, &ref)
	if len(ref.Stratified) != len(in.Stratified) {
		t.Fatalf("reference printed %d stratified epochs for %d", len(ref.Stratified), len(in.Stratified))
	}
	for i, c := range in.Stratified {
		g := computeStratified(t, c)
		compareStratified(t, ref.Stratified[i], g)
		if t.Failed() {
			t.Fatalf("inputs: %+v", c)
		}
	}
}

// TestDocEmbedsReference keeps the specification's Python listing identical
// to the reference implementation that TestPythonReference executes.
func TestDocEmbedsReference(t *testing.T) {
	src, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	algo, _, ok := strings.Cut(string(src), driverMarker)
	if !ok {
		t.Fatalf("%s lacks the marker %q", referencePath, driverMarker)
	}
	// The module docstring describes the file, not the algorithm; the doc
	// lists everything after it.
	_, algo, ok = strings.Cut(algo, "\"\"\"\n\n")
	if !ok {
		t.Fatalf("%s: no module docstring", referencePath)
	}
	algo = strings.TrimSpace(algo)
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```python\n"+algo+"\n```") {
		t.Errorf("%s does not list the algorithm part of %s verbatim in a ```python block; copy it from there", docPath, referencePath)
	}
}
