package shuffle

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
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
}

// TestPythonReference runs the independent Python implementation of the
// specification on the golden inputs and requires it to agree with Go on
// every output, so that docs/shuffle.md is proven reimplementable.
func TestPythonReference(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed; the Go golden vectors still ran in TestGolden")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, referencePath, goldenPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", referencePath, err, stderr.String())
	}
	var ref referenceOutput
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatalf("decoding %s output: %v", referencePath, err)
	}

	golden := readGolden(t)
	if len(ref.Cases) != len(golden.Cases) || len(ref.Streams) != len(golden.Streams) || len(ref.Bounded) != len(golden.Bounded) {
		t.Fatalf("reference printed %d cases, %d streams, %d bounded; golden has %d, %d, %d",
			len(ref.Cases), len(ref.Streams), len(ref.Bounded), len(golden.Cases), len(golden.Streams), len(golden.Bounded))
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
			outputs[j] = s.pcg.Uint64()
		}
		r := ref.Streams[i]
		if r.Seed1 != seed1 || r.Seed2 != seed2 || !reflect.DeepEqual(r.Outputs, outputs) {
			t.Errorf("stream %d: python seeds %#x %#x outputs %#x; go %#x %#x %#x", i, r.Seed1, r.Seed2, r.Outputs, seed1, seed2, outputs)
		}
	}
	for i, bd := range golden.Bounded {
		var s stream
		s.pcg.Seed(bd.Seed1, bd.Seed2)
		values := make([]uint64, len(bd.N))
		for j, n := range bd.N {
			values[j] = s.bounded(n)
		}
		if r := ref.Bounded[i]; !reflect.DeepEqual(r.Values, values) {
			t.Errorf("bounded %d: python %v, go %v", i, r.Values, values)
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
