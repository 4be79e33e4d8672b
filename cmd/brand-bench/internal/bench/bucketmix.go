package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/s3backend"
)

// The mixture of the buckets benchmark (--mix): the photos split by class
// into two datasets (photos-a, classes 0–4; photos-b, 5–9), read by
// brand.Buckets as one bucketed mixture in two stages (mode brand-mix),
// as a generation model's resolution stages are trained:
//
//	stage 1, from the job's first step: weights 0.3/0.7, the buckets one
//	         size below --side's (SDXL's at 768² below 1024²) and a budget
//	         of as many of them a step as --budget holds of --side's
//	stage 2, from a third of the measured epoch on: weights 0.5/0.5,
//	         --side's buckets and --budget
//
// The trainer's CPU is held to the PIL loader's over the same photos at
// --side's buckets, a step's images and its pixels both: the first stage's
// smaller images cost the trainer less each, so the ratio a megapixel is
// the one the mixture cannot flatter.

// BucketsMixReport is the mixture's part of the report.
type BucketsMixReport struct {
	Sources    []string `json:"sources"`
	Images     []int    `json:"images"` // each source's
	Schedule   []string `json:"mix_schedule"`
	Buckets    []string `json:"buckets"` // each round's stages
	Budget     []string `json:"budget"`
	EpochSteps int      `json:"epoch_steps"`
	// Epoch is /epoch/1 of round 0's job: each source's buckets.
	Epoch *api.MixInfo `json:"epoch"`
}

// bucketMixLower is the stage below a side's buckets: its preset and side.
func bucketMixLower(side int) (string, int) {
	if side == 1024 {
		return "sdxl-768", 768
	}
	return "sdxl-512", 512
}

// packBucketMix links the photos of src into two trees by class and packs
// each as a dataset of its own store under dir; it returns the gateway's
// --dataset flags and the datasets' bytes.
func packBucketMix(ctx context.Context, src, dir string, rep *BucketsMixReport) ([]string, int64, error) {
	_ = os.RemoveAll(dir)
	var flags []string
	var bytes int64
	for h, name := range []string{"photos-a", "photos-b"} {
		tree := filepath.Join(dir, name+"-src")
		n := 0
		for c := 5 * h; c < 5*h+5; c++ {
			from := filepath.Join(src, fmt.Sprintf("c%d", c))
			ents, err := os.ReadDir(from)
			if err != nil {
				return nil, 0, err
			}
			if err := os.MkdirAll(filepath.Join(tree, fmt.Sprintf("c%d", c)), 0o755); err != nil {
				return nil, 0, err
			}
			for _, e := range ents {
				if err := os.Link(filepath.Join(from, e.Name()), filepath.Join(tree, fmt.Sprintf("c%d", c), e.Name())); err != nil {
					return nil, 0, err
				}
				if strings.HasSuffix(e.Name(), ".jpg") {
					n++
				}
			}
		}
		storeDir := filepath.Join(dir, name+"-store")
		store, err := s3backend.NewLocal(storeDir)
		if err != nil {
			return nil, 0, err
		}
		res, err := dataset.Pack(ctx, tree, store, dataset.PackOptions{ChunkSize: 32 << 20, Shuffle: true, Seed: 78 + uint64(h), Parallel: 2, Name: name, Overwrite: true})
		if err != nil {
			return nil, 0, err
		}
		if _, err := dataset.WriteSizes(ctx, store, res.Index, 0, 2); err != nil {
			return nil, 0, err
		}
		flags = append(flags, "--dataset", name+"="+"file://"+storeDir)
		bytes += res.Index.TotalBytes()
		rep.Sources = append(rep.Sources, name)
		rep.Images = append(rep.Images, n)
	}
	return flags, bytes, nil
}

// bucketMixJob is round's job: its epoch round+1, the stages' change a
// third of the way into it (the mixture's epochs are epochSteps global
// steps each, the first stage's).
func bucketMixJob(cfg BucketsConfig, preset string, epochSteps, round int) (schedule, buckets, budget string, epochStart int) {
	lower, side := bucketMixLower(cfg.Side)
	low := cfg.Budget * int64(side*side) / int64(cfg.Side*cfg.Side)
	epochStart = (round + 1) * epochSteps
	at := epochStart + epochSteps/3
	schedule = fmt.Sprintf("0:photos-a:0.3,photos-b:0.7;%d:photos-a:0.5,photos-b:0.5", at)
	buckets = fmt.Sprintf("0@%s|%d@%s", lower, at, preset)
	budget = fmt.Sprintf("0@%d|%d@%d", low, at, cfg.Budget)
	return schedule, buckets, budget, epochStart
}

// bucketMixEpoch asks the gateway for the mixture's epoch length (its
// first stage's steps: the stages after do not move it) and round 0's
// /epoch/1.
func bucketMixEpoch(ctx context.Context, cfg BucketsConfig, g *gatewayProc, preset string, rep *BucketsMixReport) error {
	lower, side := bucketMixLower(cfg.Side)
	low := cfg.Budget * int64(side*side) / int64(cfg.Side*cfg.Side)
	first := url.Values{"mix_schedule": {"0:photos-a:0.3,photos-b:0.7"}, "buckets": {lower}, "budget": {strconv.FormatInt(low, 10)}, "seed": {"7"}}
	var info api.EpochInfo
	if err := getJSON(ctx, g.hc, g.base+"/epoch/0?"+first.Encode(), &info); err != nil {
		return err
	}
	rep.EpochSteps = info.Batches
	schedule, buckets, budget, _ := bucketMixJob(cfg, preset, rep.EpochSteps, 0)
	q := url.Values{"mix_schedule": {schedule}, "buckets": {buckets}, "budget": {budget}, "seed": {"7"}}
	if err := getJSON(ctx, g.hc, g.base+"/epoch/1?"+q.Encode(), &info); err != nil {
		return err
	}
	if info.Batches != rep.EpochSteps {
		return fmt.Errorf("bench: the staged mixture's epoch 1 has %d steps, its first stage's epoch 0 %d", info.Batches, rep.EpochSteps)
	}
	rep.Epoch = info.Mix
	return nil
}

// bucketMixArgs are the script's arguments for round's brand-mix pass.
func bucketMixArgs(cfg BucketsConfig, preset string, rep *BucketsMixReport, round int) []string {
	schedule, buckets, budget, start := bucketMixJob(cfg, preset, rep.EpochSteps, round)
	rep.Schedule = append(rep.Schedule, schedule)
	rep.Buckets = append(rep.Buckets, buckets)
	rep.Budget = append(rep.Budget, budget)
	return []string{"--mix-schedule", schedule, "--stage-buckets", buckets, "--stage-budget", budget, "--epoch-start", strconv.Itoa(start)}
}

// writeText writes the mixture's part of the report.
func (m *BucketsMixReport) writeText(sb *strings.Builder) {
	fmt.Fprintf(sb, "\nThe bucketed mixture (brand-mix): %s of %v images; an epoch %d global steps (its first stage's); each round's job: mix_schedule=%s, buckets=%s, budget=%s.\n",
		strings.Join(m.Sources, " and "), m.Images, m.EpochSteps, strings.Join(m.Schedule, " / "), strings.Join(m.Buckets, " / "), strings.Join(m.Budget, " / "))
	if m.Epoch == nil {
		return
	}
	sb.WriteString("\nRound 0's /epoch/1, each source's pass:\n\n| source | bucket | stage from | images | steps | batch size | dropped | fill |\n| --- | --- | --: | --: | --: | --: | --: | --: |\n")
	for _, c := range m.Epoch.Components {
		if c.Buckets == nil {
			continue
		}
		for _, b := range c.Buckets.Buckets {
			if b.Batches > 0 {
				stage := "—"
				if b.Stage != nil {
					stage = strconv.FormatUint(*b.Stage, 10)
				}
				fmt.Fprintf(sb, "| %s | %s | %s | %d | %d | %d | %d | %.3f |\n", c.Dataset, b.Shape, stage, b.Samples, b.Batches, b.BatchSize, b.Dropped, b.Fill)
			}
		}
	}
}
