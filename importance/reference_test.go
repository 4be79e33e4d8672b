package importance

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"testing"
	"time"
)

const referencePath = "testdata/reference.py"

// TestPythonReference runs testdata/reference.py, an independent
// implementation of docs/importance.md written from the document, on the
// golden inputs and requires every output to equal the golden file's:
// weights and chunk weights to the bit, draws, chunk order, window starts,
// the whole order, the streams, the logarithm and the snapshot encodings.
// It is the evidence that the document is precise enough to reimplement.
func TestPythonReference(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed; the Go golden vectors still ran in TestGolden")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, referencePath, goldenPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", referencePath, err, stderr.String())
	}
	var ref goldenFile
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatalf("decoding %s output: %v", referencePath, err)
	}
	data, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var golden goldenFile
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) != len(golden.Cases) || len(ref.Streams) != len(golden.Streams) ||
		len(ref.Logs) != len(golden.Logs) || len(ref.Snapshots) != len(golden.Snapshots) {
		t.Fatalf("reference printed %d cases, %d streams, %d logs, %d snapshots; golden has %d, %d, %d, %d",
			len(ref.Cases), len(ref.Streams), len(ref.Logs), len(ref.Snapshots),
			len(golden.Cases), len(golden.Streams), len(golden.Logs), len(golden.Snapshots))
	}
	for i, g := range golden.Cases {
		r := ref.Cases[i]
		for _, f := range []struct {
			name      string
			got, want any
		}{
			{"weights", r.Weights, g.Weights},
			{"chunk_weights", r.ChunkWeights, g.ChunkWeights},
			{"draws", r.Draws, g.Draws},
			{"chunk_order", r.ChunkOrder, g.ChunkOrder},
			{"window_starts", r.WindowStarts, g.WindowStarts},
			{"order", r.Order, g.Order},
		} {
			if !reflect.DeepEqual(f.got, f.want) {
				t.Errorf("case %s: python %s %v, golden %v", g.Name, f.name, f.got, f.want)
			}
		}
	}
	for i, g := range golden.Streams {
		if r := ref.Streams[i]; r.Seed1 != g.Seed1 || r.Seed2 != g.Seed2 || !reflect.DeepEqual(r.Outputs, g.Outputs) {
			t.Errorf("stream %d: python %#x %#x %#x, golden %#x %#x %#x", i, r.Seed1, r.Seed2, r.Outputs, g.Seed1, g.Seed2, g.Outputs)
		}
	}
	for i, g := range golden.Logs {
		if r := ref.Logs[i]; r.Log != g.Log {
			t.Errorf("log %d: python %#x, golden %#x", i, r.Log, g.Log)
		}
	}
	for i, g := range golden.Snapshots {
		if r := ref.Snapshots[i]; r.Encoding != g.Encoding || r.Version != g.Version {
			t.Errorf("snapshot %d: python %s %s, golden %s %s", i, r.Version, r.Encoding, g.Version, g.Encoding)
		}
	}
}
