package importance

import (
	"encoding/hex"
	"flag"
	"math"
	"reflect"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from the current implementation")

const goldenPath = "testdata/golden.json"

// goldenFile is the layout of testdata/golden.json: inputs with the outputs
// they must produce, forever; docs/importance.md describes every field.
type goldenFile struct {
	Comment   string           `json:"comment"`
	Cases     []goldenCase     `json:"cases"`
	Streams   []goldenStream   `json:"streams"`
	Logs      []goldenLog      `json:"logs"`
	Snapshots []goldenSnapshot `json:"snapshots"`
}

type goldenCase struct {
	Name   string    `json:"name"`
	Counts []int     `json:"counts"`
	Scores []float32 `json:"scores"`
	Seed   uint64    `json:"seed"`
	Epoch  uint64    `json:"epoch"`
	Window int       `json:"window"`
	Hot    int       `json:"hot"`

	Weights      []float64 `json:"weights"`       // per sample
	ChunkWeights []float64 `json:"chunk_weights"` // W_c
	Draws        []int     `json:"draws"`         // per chunk
	ChunkOrder   []int     `json:"chunk_order"`   // chunks read, in epoch order
	WindowStarts []int     `json:"window_starts"`
	Order        []int     `json:"order"` // the whole epoch
}

type goldenStream struct {
	Seed    uint64   `json:"seed"`
	Epoch   uint64   `json:"epoch"`
	Domain  uint64   `json:"domain"`
	Index   uint64   `json:"index"`
	Seed1   uint64   `json:"seed1"`
	Seed2   uint64   `json:"seed2"`
	Outputs []uint64 `json:"outputs"`
}

// goldenLog pins logSpec bit for bit: x and log(x) as float64 bit patterns.
type goldenLog struct {
	X   uint64 `json:"x_bits"`
	Log uint64 `json:"log_bits"`
}

type goldenSnapshot struct {
	IndexID  string    `json:"index_id"`
	Job      string    `json:"job"`
	Epoch    uint64    `json:"epoch"`
	Scores   []float32 `json:"scores"`
	Encoding string    `json:"encoding"` // hex
	Version  string    `json:"version"`
}

func goldenInputs() goldenFile {
	uneven := []int{5, 0, 7, 1, 9, 0, 3, 6, 2, 8, 4, 4}
	example := []float32{4, 1.5, 0.25, 0.5, 3, 2, 0.125, 1, 0.75, 0, 2.5, 0.375}
	equal := make([]float32, 16)
	for i := range equal {
		equal[i] = 1.5
	}
	g := goldenFile{
		Comment: "Golden vectors of the importance order and snapshot format (docs/importance.md). " +
			"Every output is fixed forever; regenerate only with a new format version. " +
			"Scores are float32 and weights float64, written in their shortest round-trip decimal form.",
		Cases: []goldenCase{
			{Name: "worked-example", Counts: []int{2, 3, 2, 2, 3}, Scores: example, Seed: 1, Epoch: 1, Window: 2},
			{Name: "worked-example-hot", Counts: []int{2, 3, 2, 2, 3}, Scores: example, Seed: 1, Epoch: 1, Window: 2, Hot: 1},
			{Name: "equal-scores", Counts: []int{4, 4, 4, 4}, Scores: equal, Seed: 2, Epoch: 3, Window: 3},
			{Name: "skewed-uneven", Counts: uneven, Scores: skewedScores(sumInts(uneven), 21), Seed: 42, Epoch: 7, Window: 3, Hot: 2},
			{Name: "clustered-16x8", Counts: uniformCounts(16, 8), Scores: clusteredScores(uniformCounts(16, 8), 22), Seed: 1 << 63, Epoch: 2, Window: 4, Hot: 3},
		},
	}
	for _, d := range []uint64{domainKeys, domainDraws, domainWindow} {
		for _, idx := range []uint64{0, 3} {
			g.Streams = append(g.Streams, goldenStream{Seed: 1, Epoch: 1, Domain: d, Index: idx})
		}
	}
	for _, x := range []float64{0.5, 0.75, 1.0 / 3, 0.9999999999999999, 5.551115123125783e-17, 0.7071067811865476, 0.1, 0.123456789} {
		g.Logs = append(g.Logs, goldenLog{X: math.Float64bits(x)})
	}
	g.Snapshots = []goldenSnapshot{
		{IndexID: "0123456789abcdef", Job: "job", Epoch: 0, Scores: []float32{1, 0.5, 2}},
		{IndexID: "fedcba9876543210", Job: "resnet-50.run_2", Epoch: 12, Scores: []float32{0, 3.25, 1e-3, 7}},
	}
	return g
}

// compute fills in every output of g from the implementation.
func compute(t *testing.T, g goldenFile) goldenFile {
	for i := range g.Cases {
		c := &g.Cases[i]
		e := mustEpoch(t, c.Counts, mustSnapshot(t, c.Scores), c.Seed, c.Epoch, c.Window, c.Hot)
		c.Weights = e.weights
		c.ChunkWeights = e.chunkW
		c.Draws = e.draws
		c.ChunkOrder = e.ChunkOrder()
		c.WindowStarts = nil
		for w := range e.NumWindows() + 1 {
			c.WindowStarts = append(c.WindowStarts, e.WindowStart(w))
		}
		c.Order = wholeOrder(e)
	}
	for i := range g.Streams {
		s := &g.Streams[i]
		s.Seed1, s.Seed2 = streamSeeds(s.Seed, s.Epoch, s.Domain, s.Index)
		st := newStream(s.Seed, s.Epoch, s.Domain, s.Index)
		s.Outputs = nil
		for range 4 {
			s.Outputs = append(s.Outputs, st.Uint64())
		}
	}
	for i := range g.Logs {
		g.Logs[i].Log = math.Float64bits(logSpec(math.Float64frombits(g.Logs[i].X)))
	}
	for i := range g.Snapshots {
		s := &g.Snapshots[i]
		snap, err := NewSnapshot(dataset{s.IndexID, len(s.Scores)}, s.Job, s.Epoch, s.Scores)
		if err != nil {
			t.Fatal(err)
		}
		s.Encoding = hex.EncodeToString(snap.MarshalBinary())
		s.Version = snap.Version()
	}
	return g
}

func TestGolden(t *testing.T) {
	got := compute(t, goldenInputs())
	if *update {
		golden.Write(t, goldenPath, got)
	}
	var want, wantAgain goldenFile
	golden.Read(t, goldenPath, &want)
	golden.Read(t, goldenPath, &wantAgain) // compute may write into want's slices
	// The file's inputs, not the generator's, drive the check: a change to
	// the synthetic score generators must not silently move the vectors.
	have := compute(t, want)
	if !reflect.DeepEqual(have, wantAgain) {
		for i := range have.Cases {
			if !reflect.DeepEqual(have.Cases[i], wantAgain.Cases[i]) {
				t.Errorf("case %s: got %+v\nwant %+v", have.Cases[i].Name, have.Cases[i], wantAgain.Cases[i])
			}
		}
		t.Fatal("outputs differ from testdata/golden.json (run with -update only for a new format version)")
	}
	// Every golden snapshot decodes to itself.
	for _, s := range want.Snapshots {
		b, _ := hex.DecodeString(s.Encoding)
		d, err := Decode(b, dataset{s.IndexID, len(s.Scores)})
		if err != nil || d.Version() != s.Version {
			t.Errorf("golden snapshot %s: %v", s.Version, err)
		}
	}
}
