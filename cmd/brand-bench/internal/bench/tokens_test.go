package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// writeCorpus writes what the project's Megatron writer writes for the
// same documents, token j being j.
func TestWriteCorpusIsMegatrons(t *testing.T) {
	lengths := []int{3, 1, 700, 42}
	prefix := filepath.Join(t.TempDir(), "c")
	n, err := writeCorpus(prefix, lengths)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]int64
	var j int64
	for _, l := range lengths {
		d := make([]int64, l)
		for k := range d {
			d[k] = j
			j++
		}
		docs = append(docs, d)
	}
	if n != j {
		t.Fatalf("%d tokens, want %d", n, j)
	}
	wantBin, wantIdx := megatrontest.Files("int32", docs)
	for ext, want := range map[string][]byte{".bin": wantBin, ".idx": wantIdx} {
		got, err := os.ReadFile(prefix + ext)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from megatrontest.Files'", ext)
		}
	}
}

// pieceCheck counts fill, cuts of documents shorter than seq, and whether
// every token was read once, from position_ids alone.
func TestPieceCheck(t *testing.T) {
	const P, E = tokensPad, tokensEOS
	type seqn struct{ ids, pos []int32 }
	long := seqn{[]int32{8, 9, 10, 11, 12, 13, 14, 15}, []int32{0, 1, 2, 3, 4, 5, 6, 7}}
	tests := []struct {
		name      string
		lengths   []int
		concat    bool
		seqs      []seqn
		fill      float64
		shortCuts int
		exact     bool
	}{
		{"bestfit whole", []int{3, 5, 10}, false, []seqn{long,
			{[]int32{16, 17, 0, 1, 2, P, P, P}, []int32{0, 1, 0, 1, 2, 0, 1, 2}},
			{[]int32{3, 4, 5, 6, 7, P, P, P}, []int32{0, 1, 2, 3, 4, 0, 1, 2}}}, 18.0 / 24, 0, true},
		{"a short document cut", []int{3, 5, 10}, false, []seqn{long,
			{[]int32{16, 17, 0, 1, 2, 3, 4, 5}, []int32{0, 1, 0, 1, 2, 0, 1, 2}},
			{[]int32{6, 7, P, P, P, P, P, P}, []int32{0, 1, 0, 1, 2, 3, 4, 5}}}, 18.0 / 24, 1, true},
		{"a document missing", []int{3, 5, 10}, false, []seqn{long,
			{[]int32{16, 17, 3, 4, 5, 6, 7, P}, []int32{0, 1, 0, 1, 2, 3, 4, 0}}}, 15.0 / 16, 0, false},
		{"a piece that skips a token", []int{3, 5}, false, []seqn{
			{[]int32{0, 1, 2, 3, 5, 5, 6, 7}, []int32{0, 1, 2, 0, 1, 2, 3, 4}}}, 1, 0, false},
		{"concat", []int{3, 5}, true, []seqn{
			{[]int32{0, 1, 2, E, 3, 4, 5, 6}, []int32{0, 1, 2, 3, 0, 1, 2, 3}},
			{[]int32{7, E, P, P, P, P, P, P}, []int32{0, 1, 0, 1, 2, 3, 4, 5}}}, 10.0 / 16, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			starts := make([]int64, len(tt.lengths)+1)
			for i, l := range tt.lengths {
				starts[i+1] = starts[i] + int64(l)
			}
			c := newPieceCheck(tt.lengths, starts, 8, tt.concat)
			for _, s := range tt.seqs {
				c.add(s.ids, s.pos)
			}
			if c.fill() != tt.fill || c.shortCuts != tt.shortCuts || c.exact() != tt.exact {
				t.Errorf("fill %v, short cuts %d, exact %v; want %v, %d, %v", c.fill(), c.shortCuts, c.exact(), tt.fill, tt.shortCuts, tt.exact)
			}
		})
	}
}

// TestTokensSmoke runs the tokens benchmark on a tiny corpus and blend and
// checks the structure of its report: every job's epoch read whole and
// exact, bestfit cutting no short document where concat does, every
// trainer-side loader measured, the fresh gateways timed, every target
// evaluated, the outputs written. It checks no performance figure.
func TestTokensSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds brand, starts MinIO, three gateways and Python with torch")
	}
	cfg := SmallTokensConfig()
	if _, err := findInterpreter(context.Background(), "", "numpy, torch", ""); err != nil {
		t.Skip(err)
	}
	cfg.Documents, cfg.BlendPrefixes, cfg.BlendDocs, cfg.FirstBatches, cfg.TrainerTokens = 800, 20, 2, 1, 1<<18
	cfg.ChunkSize = 256 << 10
	cfg.GatewayBinary = cmdtest.Build(t, "brand")
	cfg.WorkDir = t.TempDir()
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := RunTokens(ctx, cfg)
	if err != nil {
		t.Fatalf("RunTokens: %v\nlog:\n%s", err, log.String())
	}
	if len(rep.Jobs) != 4 {
		t.Fatalf("%d jobs, want 4", len(rep.Jobs))
	}
	for _, j := range rep.Jobs {
		// The gateway's CPU over a tiny warm epoch may be 0 in /proc's
		// 10 ms ticks: the rates are not checked.
		if !j.Exact || j.Sequences == 0 || j.Fill != j.GatewayFill || j.WarmTokens == 0 {
			t.Errorf("seq %d %s: %+v", j.Seq, j.Pack, j)
		}
		if (j.Pack == "bestfit") != (j.ShortCuts == 0) {
			t.Errorf("seq %d %s: %d documents shorter than seq cut", j.Seq, j.Pack, j.ShortCuts)
		}
	}
	if len(rep.Trainer) != 6 {
		t.Fatalf("%d trainer-side loaders, want 6", len(rep.Trainer))
	}
	for _, tr := range rep.Trainer {
		if tr.Tokens < int64(cfg.TrainerTokens) || tr.NsPerToken <= 0 {
			t.Errorf("%s: %+v", tr.Loader, tr)
		}
	}
	if len(rep.First.First) != 1 || rep.First.First[0] <= 0 || rep.First.IndexSeconds <= 0 || len(rep.Targets) != 3 {
		t.Errorf("first batch %+v, targets %+v", rep.First, rep.Targets)
	}
	for _, write := range []func(*bytes.Buffer) error{
		func(b *bytes.Buffer) error { return rep.WriteText(b) },
		func(b *bytes.Buffer) error { return rep.WriteJSON(b) },
		func(b *bytes.Buffer) error { return writeChart(b, rep) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil || b.Len() == 0 {
			t.Errorf("report: %v (%d bytes)", err, b.Len())
		}
	}
}
