package importance

import (
	"reflect"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/golden"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

const referencePath = "testdata/reference.py"

// TestPythonReference runs testdata/reference.py, an independent
// implementation of docs/importance.md written from the document, on the
// golden inputs and requires every output to equal the golden file's:
// weights and chunk weights to the bit, draws, chunk order, window starts,
// the whole order, the streams, the logarithm and the snapshot encodings.
// It is the evidence that the document is precise enough to reimplement.
func TestPythonReference(t *testing.T) {
	var ref, file goldenFile
	pythontest.Reference(t, referencePath, goldenPath, &ref, 60*time.Second)
	golden.Read(t, goldenPath, &file)
	if len(ref.Cases) != len(file.Cases) || len(ref.Streams) != len(file.Streams) ||
		len(ref.Logs) != len(file.Logs) || len(ref.Snapshots) != len(file.Snapshots) {
		t.Fatalf("reference printed %d cases, %d streams, %d logs, %d snapshots; golden has %d, %d, %d, %d",
			len(ref.Cases), len(ref.Streams), len(ref.Logs), len(ref.Snapshots),
			len(file.Cases), len(file.Streams), len(file.Logs), len(file.Snapshots))
	}
	for i, g := range file.Cases {
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
	for i, g := range file.Streams {
		if r := ref.Streams[i]; r.Seed1 != g.Seed1 || r.Seed2 != g.Seed2 || !reflect.DeepEqual(r.Outputs, g.Outputs) {
			t.Errorf("stream %d: python %#x %#x %#x, golden %#x %#x %#x", i, r.Seed1, r.Seed2, r.Outputs, g.Seed1, g.Seed2, g.Outputs)
		}
	}
	for i, g := range file.Logs {
		if r := ref.Logs[i]; r.Log != g.Log {
			t.Errorf("log %d: python %#x, golden %#x", i, r.Log, g.Log)
		}
	}
	for i, g := range file.Snapshots {
		if r := ref.Snapshots[i]; r.Encoding != g.Encoding || r.Version != g.Version {
			t.Errorf("snapshot %d: python %s %s, golden %s %s", i, r.Version, r.Encoding, g.Version, g.Encoding)
		}
	}
}
