package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// maxOverMean is the busiest rank over the ranks' mean, averaged over
// the batches, and the worst; a batch with no vision tokens is even.
func TestMaxOverMean(t *testing.T) {
	mean, worst := maxOverMean([][]int64{{10, 10, 10, 10}, {40, 0, 0, 0}, {0, 0, 0, 0}, {30, 10, 20, 20}})
	if want := (1 + 4 + 1 + 1.5) / 4; math.Abs(mean-want) > 1e-12 || worst != 4 {
		t.Fatalf("mean %v, worst %v; want %v, 4", mean, worst, want)
	}
	if m, w := maxOverMean(nil); m != 0 || w != 0 {
		t.Fatalf("no batches: %v %v", m, w)
	}
}

// npyI4 is an int32 .npy of shape.
func npyI4(t *testing.T, shape []int64, v ...int32) []byte {
	b, err := npy.AppendHeader(nil, "<i4", shape)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

// visionCheck counts pad from the end, vision tokens from the spans, and
// finds a span off its placeholders or a placeholder outside every span.
func TestVisionCheck(t *testing.T) {
	const I, S, E, P = 9, 7, 8, 99
	tests := []struct {
		name    string
		ids     []int32
		spans   []int32
		vision  int64
		nonpad  int64
		aligned bool
	}{
		{"two images", []int32{1, S, I, I, E, 2, S, I, E, P, P}, []int32{2, 2, 7, 1}, 3, 9, true},
		{"no image", []int32{1, 2, 3, P}, nil, 0, 3, true},
		{"a span off by one", []int32{1, S, I, I, E, 2, P}, []int32{1, 2}, 2, 6, false},
		{"a placeholder outside", []int32{1, S, I, E, I, P}, []int32{2, 1}, 1, 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := visionCheck{image: I, start: S, end: E, pad: P, aligned: true}
			n, err := c.add(map[string][]byte{"input_ids.npy": npyI4(t, []int64{int64(len(tt.ids))}, tt.ids...),
				"image_spans.npy": npyI4(t, []int64{int64(len(tt.spans) / 2), 2}, tt.spans...)})
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.vision || c.nonpad != tt.nonpad || c.total != int64(len(tt.ids)) || c.aligned != tt.aligned || c.images != int64(len(tt.spans)/2) {
				t.Errorf("vision %d, nonpad %d of %d, aligned %v, images %d; want %d, %d, %v", n, c.nonpad, c.total, c.aligned, c.images, tt.vision, tt.nonpad, tt.aligned)
			}
		})
	}
}

// The generated shards are the same bytes for the same seed, hold every
// sample's members under its key, and mix the four kinds.
func TestVisionSetShards(t *testing.T) {
	set := visionSet{Samples: 40, Shards: 3, MinSide: 32, MaxSide: 96, Seed: 5}
	kinds := map[string]int{}
	var samples int64
	for k := range set.Shards {
		a, st, err := set.shard(k)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := set.shard(k)
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("shard %d differs between two makings (%v)", k, err)
		}
		samples += st.Samples
		for kind, n := range st.Kinds {
			kinds[kind] += n
		}
		tr := tar.NewReader(bytes.NewReader(a))
		members := 0
		for {
			_, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			members++
		}
		if members != int(st.Samples+st.Images) {
			t.Errorf("shard %d: %d members for %d samples and %d images", k, members, st.Samples, st.Images)
		}
	}
	if samples != 40 || len(kinds) != 4 {
		t.Fatalf("%d samples of kinds %v; want 40 of four kinds", samples, kinds)
	}
}

// TestVisionSmoke runs the vision benchmark at a tiny size and checks the
// structure of its report: the vision epoch read whole with its spans
// aligned, its fill and rank figures computed, both trainer-side loaders
// measured with the collator's tokens equal to the gateway's, each
// tokenizer's cold epoch measured, every target evaluated, the outputs
// written. It checks no performance figure.
func TestVisionSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds brand, starts MinIO, gateways and Python with torch, PIL and sentencepiece")
	}
	python := pythontest.Need(t, "scripts/test.sh", "numpy", "torch", "PIL", "sentencepiece")
	cfg := SmallVisionConfig()
	cfg.Samples, cfg.Shards, cfg.MaxSide, cfg.Seq, cfg.BatchSize, cfg.TextDocs, cfg.TextRounds = 60, 3, 160, 1024, 1, 200, 2
	cfg.Interpreter = python
	cfg.GatewayBinary = cmdtest.Build(t, "brand")
	cfg.WorkDir = t.TempDir()
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := RunVision(ctx, cfg)
	if err != nil {
		t.Fatalf("RunVision: %v\nlog:\n%s", err, log.String())
	}
	if len(rep.Jobs) != 2 || rep.Jobs[0].Balance != "" || rep.Jobs[1].Balance != "vision" {
		t.Fatalf("vision jobs %+v; want the plain cut's and balance=vision's", rep.Jobs)
	}
	for _, j := range rep.Jobs {
		if j.Documents != cfg.Samples || j.Sequences == 0 || !j.SpansAligned || j.Fill != j.GatewayFill || j.Images != rep.Images ||
			j.RankMaxOverMean < 1 || j.RankMaxOverMeanWorst < j.RankMaxOverMean || j.FullBatches == 0 || !j.PlanExact {
			t.Errorf("vision job: %+v", j)
		}
	}
	// balance= moves sequences between ranks, never changes them.
	if p, b := rep.Jobs[0], rep.Jobs[1]; p.Sequences != b.Sequences || p.NonPad != b.NonPad || p.Images != b.Images {
		t.Errorf("balance=vision read %d sequences, %d tokens, %d images; the plain cut %d, %d, %d", b.Sequences, b.NonPad, b.Images, p.Sequences, p.NonPad, p.Images)
	}
	if len(rep.Trainer) != 2 {
		t.Fatalf("%d trainer-side loaders, want 2", len(rep.Trainer))
	}
	for _, tr := range rep.Trainer {
		if tr.Samples != cfg.Samples || !tr.TokensEqual || tr.UsPer <= 0 || tr.Sequences == 0 {
			t.Errorf("%s: %+v", tr.Loader, tr)
		}
	}
	if len(rep.Tokenizers) != 2*cfg.TextRounds {
		t.Fatalf("%d tokenizer epochs, want %d", len(rep.Tokenizers), 2*cfg.TextRounds)
	}
	for _, tk := range rep.Tokenizers {
		// The gateway's CPU over a tiny cold epoch may be 0 in /proc's
		// 10 ms ticks: the rates are not checked.
		if tk.Tokens == 0 || tk.Vocabulary == 0 || tk.Seconds <= 0 {
			t.Errorf("tokenizer %+v", tk)
		}
	}
	if len(rep.Targets) != 4 || rep.Targets[1].Status == NA || rep.Targets[1].Ratio != rep.Jobs[1].RankMaxOverMean {
		t.Errorf("targets %+v; want four, balance=vision's measured", rep.Targets)
	}
	for _, write := range []func(*bytes.Buffer) error{
		func(b *bytes.Buffer) error { return rep.WriteText(b) },
		func(b *bytes.Buffer) error { return rep.WriteJSON(b) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil || b.Len() == 0 {
			t.Errorf("report: %v (%d bytes)", err, b.Len())
		}
	}
}
