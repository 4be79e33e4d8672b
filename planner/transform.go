package planner

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"text/tabwriter"
	"time"
)

// TransformInput is what planning a pipeline (transform=) needs: the
// rate the trainers want, the pipeline's CPU per image as a node measured
// it (or a calibration on generated photos when it has transformed
// nothing yet), and what decoding alone costs and weighs, for the
// question whether caching decoded images would pay.
type TransformInput struct {
	Pipeline     string
	ImagesPerSec float64
	// PerImage is the pipeline's CPU per image; Measured says whether it
	// is the node's figure over images it served (else a calibration).
	PerImage time.Duration
	Measured bool
	// DecodePerImage is decoding alone, per image (calibrated), and
	// DecodedFactor a decoded image's bytes per byte of its JPEG.
	DecodePerImage time.Duration
	DecodedFactor  float64
	// Workers is the node's transform workers (its cores by default).
	Workers int
}

// TransformPlan is a plan's answer for a pipeline.
type TransformPlan struct {
	Pipeline      string  `json:"pipeline"`
	ImagesPerSec  float64 `json:"images_per_sec"`
	CPUPerImageMs float64 `json:"cpu_per_image_ms"`
	// Measured: CPUPerImageMs is the node's over the images it served;
	// false: a calibration on generated photos of ImageNet-like sizes.
	Measured bool `json:"measured"`
	// Cores is the CPU the rate needs at that cost
	// (transform.CoresFor), CoresNeeded rounded up; Workers the node's,
	// Enough whether they suffice.
	Cores       float64 `json:"cores"`
	CoresNeeded int     `json:"cores_needed"`
	Workers     int     `json:"workers"`
	Enough      bool    `json:"enough"`
	// DecodedCache is whether the cache, holding decoded images instead
	// of stored bytes, would pay; nil for a cluster's prediction.
	DecodedCache *DecodedCachePlan `json:"decoded_cache,omitempty"`
}

// DecodedCachePlan weighs caching decoded images against caching the
// stored bytes, in the same cache, over a steady epoch (the last one
// simulated). Decoded images save their decode on every hit; they take
// DecodedFactor times the room, so the cache holds that much less of the
// dataset and the store is read more. It pays when the decode time saved,
// spread over the node's workers, exceeds the store time added at the
// plan's bandwidth. The crops and flips are drawn afresh every epoch, so
// only the decode can be cached, never the tensor.
type DecodedCachePlan struct {
	Factor           float64 `json:"factor"`
	DecodePerImageMs float64 `json:"decode_per_image_ms"`
	// DecodedDatasetBytes is the dataset decoded; EquivalentCacheBytes
	// the stored bytes a cache of decoded images covers.
	DecodedDatasetBytes  int64 `json:"decoded_dataset_bytes"`
	EquivalentCacheBytes int64 `json:"equivalent_cache_bytes"`
	// The optimal policy's hit ratio and store bytes in a steady epoch,
	// caching stored bytes (as the gateway does) and decoded images.
	HitRatio                  float64 `json:"hit_ratio"`
	DecodedHitRatio           float64 `json:"decoded_hit_ratio"`
	StoreBytesPerEpoch        int64   `json:"store_bytes_per_epoch"`
	DecodedStoreBytesPerEpoch int64   `json:"decoded_store_bytes_per_epoch"`
	// DecodeSecondsSaved is the decode CPU an epoch's decoded hits save,
	// over the workers; StoreSecondsAdded the store reads they add.
	DecodeSecondsSaved float64 `json:"decode_seconds_saved"`
	StoreSecondsAdded  float64 `json:"store_seconds_added"`
	Pays               bool    `json:"pays"`
}

// TransformCores answers t without the decoded-cache question: the cores
// the rate needs (a cluster's prediction, per node).
func TransformCores(t TransformInput) *TransformPlan {
	cores := 0.0
	if t.ImagesPerSec > 0 && t.PerImage > 0 {
		// transform.CoresFor's product; the planner does not link the
		// decoders.
		cores = t.ImagesPerSec * t.PerImage.Seconds()
	}
	need := int(math.Ceil(cores - 1e-9))
	return &TransformPlan{Pipeline: t.Pipeline, ImagesPerSec: t.ImagesPerSec, CPUPerImageMs: float64(t.PerImage) / 1e6,
		Measured: t.Measured, Cores: cores, CoresNeeded: need, Workers: t.Workers, Enough: t.Workers >= need}
}

// PlanTransform answers a pipeline's questions for the plan p made of
// in: the cores the rate needs, and — from a second plan of the same job
// at in.CacheBytes / t.DecodedFactor, what the cache would hold of the
// dataset as decoded images — whether caching decoded images would pay.
func PlanTransform(ctx context.Context, in PlanInput, p *Plan, t TransformInput) (*TransformPlan, error) {
	tp := TransformCores(t)
	if t.DecodedFactor <= 0 || len(p.Optimal.Epochs) == 0 {
		return tp, nil
	}
	dec := in
	dec.CacheBytes = int64(float64(in.CacheBytes) / t.DecodedFactor)
	dec.DiskCacheBytes, dec.Importance = 0, nil
	dp, err := MakePlan(ctx, dec)
	if err != nil {
		return nil, err
	}
	raw, decoded := p.Optimal.Epochs[len(p.Optimal.Epochs)-1], dp.Optimal.Epochs[len(dp.Optimal.Epochs)-1]
	d := &DecodedCachePlan{Factor: t.DecodedFactor, DecodePerImageMs: float64(t.DecodePerImage) / 1e6,
		DecodedDatasetBytes: int64(float64(p.DatasetBytes) * t.DecodedFactor), EquivalentCacheBytes: dec.CacheBytes,
		HitRatio: raw.HitRatio, DecodedHitRatio: decoded.HitRatio,
		StoreBytesPerEpoch: raw.BackendBytes, DecodedStoreBytesPerEpoch: decoded.BackendBytes}
	// Hits are chunk accesses; an epoch's images hit in the same
	// proportion.
	d.DecodeSecondsSaved = decoded.HitRatio * float64(p.Samples) * t.DecodePerImage.Seconds() / float64(max(t.Workers, 1))
	if bw := p.BackendBytesPerSec; bw > 0 {
		d.StoreSecondsAdded = float64(max(decoded.BackendBytes-raw.BackendBytes, 0)) / bw
	}
	d.Pays = d.DecodeSecondsSaved > d.StoreSecondsAdded
	tp.DecodedCache = d
	return tp, nil
}

// writeText adds the pipeline's answers to a plan's report.
func (t *TransformPlan) writeText(b *bytes.Buffer) {
	b.WriteString("\n")
	how := "measured on this node's images"
	if !t.Measured {
		how = "calibrated on generated photos"
	}
	fmt.Fprintf(b, "Transform %s: %.2f ms of CPU an image (%s)\n", t.Pipeline, t.CPUPerImageMs, how)
	if t.ImagesPerSec > 0 {
		verdict := "enough"
		if !t.Enough {
			verdict = "too few"
		}
		fmt.Fprintf(b, "  %.0f images/s need %.2f cores (%d); the node has %d workers: %s\n", t.ImagesPerSec, t.Cores, t.CoresNeeded, t.Workers, verdict)
	}
	d := t.DecodedCache
	if d == nil {
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  caching decoded images (%.1f× the bytes, %.2f ms to decode)\tstored bytes\tdecoded images\n", d.Factor, d.DecodePerImageMs)
	fmt.Fprintf(tw, "  steady epoch: optimal hit ratio\t%s\t%s\n", percent(d.HitRatio), percent(d.DecodedHitRatio))
	fmt.Fprintf(tw, "  steady epoch: store reads\t%s\t%s\n", formatBytes(d.StoreBytesPerEpoch), formatBytes(d.DecodedStoreBytesPerEpoch))
	tw.Flush()
	verdict := "does not pay"
	if d.Pays {
		verdict = "pays"
	}
	fmt.Fprintf(b, "  decoded images save %.3g s of decoding an epoch and add %.3g s of store reads: %s\n",
		d.DecodeSecondsSaved, d.StoreSecondsAdded, verdict)
}
