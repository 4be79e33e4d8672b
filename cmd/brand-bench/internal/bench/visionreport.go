package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/brandgw/brand/api"
)

// VisionReport is the benchmark's result: vision.json.
type VisionReport struct {
	Header
	Samples      int            `json:"samples"`
	Shards       int            `json:"shards"`
	Kinds        map[string]int `json:"kinds"`
	Images       int64          `json:"images"`
	MeanPixels   float64        `json:"mean_image_pixels"`
	ImageBytes   int64          `json:"image_bytes"`
	TextBytes    int64          `json:"text_bytes"`
	Rule         string         `json:"rule"`
	Pad          int            `json:"pad"`
	Seq          int            `json:"seq"`
	World        int            `json:"world"`
	BatchSize    int            `json:"batch_size"`
	Tokenizer    string         `json:"tokenizer"`
	IndexSeconds float64        `json:"index_s"` // brand index --tokenizer of the shards
	// Jobs are the vision job's epoch read at World ranks: the plain cut,
	// then balance= where it was given.
	Jobs    []VisionJob     `json:"jobs"`
	Trainer []VisionTrainer `json:"trainer"`
	// Tokenizers are tokens per gateway core-second, BPE against
	// SentencePiece, each round's.
	TextDocs    int               `json:"text_documents"`
	CorpusBytes int64             `json:"text_corpus_bytes"`
	Tokenizers  []VisionTokenizer `json:"tokenizers"`
	Targets     []Target          `json:"targets"`
	Load        []float64         `json:"load_average"` // the 1-minute load average at each stage
	Seconds     float64           `json:"seconds"`
}

// VisionJob is one vision job's epoch as read.
type VisionJob struct {
	Balance   string `json:"balance"` // "" for the plain cut
	Sequences int    `json:"sequences"`
	Batches   int    `json:"batches"`
	Documents int    `json:"documents"` // samples in the epoch's sequences (/epoch/0)
	Images    int64  `json:"images"`    // image spans read
	// Fill is non-pad tokens ÷ tokens as read; GatewayFill /epoch/0's.
	Fill        float64 `json:"fill"`
	GatewayFill float64 `json:"gateway_fill"`
	NonPad      int64   `json:"nonpad_tokens"`
	// SpansAligned: every image span lies on its placeholder IDs between
	// start and end, and no placeholder is outside a span.
	SpansAligned bool `json:"spans_aligned"`
	// RankMaxOverMean: vision tokens per rank in each full global batch,
	// the busiest ÷ the mean: averaged over the batches, and the worst.
	RankMaxOverMean      float64 `json:"vision_tokens_rank_max_over_mean"`
	RankMaxOverMeanWorst float64 `json:"vision_tokens_rank_max_over_mean_worst"`
	FullBatches          int     `json:"full_batches"`
	// Plan is /plan's prediction of the epoch (its sequences, fill and
	// vision tokens a rank under the job's cut); PlanExact says it is
	// what was read.
	Plan      api.TokenPlanEpoch `json:"plan"`
	PlanExact bool               `json:"plan_exact"`
	// The gateway's CPU over the epoch's reads (decoding and resizing
	// every image, tokenizing every sample, writing every sequence).
	Seconds       float64 `json:"seconds"`
	GatewayCPU    float64 `json:"gateway_cpu_s"`
	GatewayUsPer  float64 `json:"gateway_cpu_us_per_sample"`
	SamplesPerSec float64 `json:"samples_per_s"`
}

// VisionTrainer is one trainer-side loader's CPU per sample.
type VisionTrainer struct {
	Loader     string  `json:"loader"`
	Samples    int     `json:"samples"`
	Sequences  int     `json:"sequences"`
	Images     int     `json:"images"`
	Tokens     int64   `json:"nonpad_tokens"`
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	UsPer      float64 `json:"cpu_us_per_sample"`
	Fill       float64 `json:"fill"`
	// TokensEqual: the loader handed over the gateway's tokens (the
	// collator's expansion of every sample is the gateway's, counted).
	TokensEqual bool `json:"tokens_equal"`
}

// VisionTokenizer is one tokenizer's cold epoch in one round.
type VisionTokenizer struct {
	Round         int     `json:"round"`
	Tokenizer     string  `json:"tokenizer"` // bpe or sentencepiece
	File          string  `json:"file"`
	Vocabulary    int     `json:"vocabulary"`
	Tokens        int64   `json:"tokens"`
	Seconds       float64 `json:"seconds"`
	GatewayCPU    float64 `json:"gateway_cpu_s"`
	TokensPerCore float64 `json:"tokens_per_gateway_core_s"`
}

// tokenizerRates is each tokenizer's tokens per gateway core-second,
// over all rounds (tokens ÷ CPU summed).
func (r *VisionReport) tokenizerRates() map[string]float64 {
	tok, cpu := map[string]float64{}, map[string]float64{}
	for _, t := range r.Tokenizers {
		tok[t.Tokenizer] += float64(t.Tokens)
		cpu[t.Tokenizer] += t.GatewayCPU
	}
	out := map[string]float64{}
	for k := range tok {
		out[k] = ratio(tok[k], cpu[k])
	}
	return out
}

// targets are issue 70's.
func (r *VisionReport) targets() []Target {
	var ts []Target
	if len(r.Jobs) > 0 {
		j := r.Jobs[0]
		t := atMost("vision job padding (1 − fill), as read", 1-j.Fill, 0.02)
		t.Note = fmt.Sprintf("fill %.4f, /epoch/0 %.4f; spans aligned %v", j.Fill, j.GatewayFill, j.SpansAligned)
		if !j.SpansAligned {
			t.Status = Miss
		}
		ts = append(ts, t)
		plain := j.RankMaxOverMean
		var bal *VisionJob
		for i := range r.Jobs {
			if r.Jobs[i].Balance != "" {
				bal = &r.Jobs[i]
			}
		}
		if bal == nil {
			t = Target{Name: "vision tokens a rank, max ÷ mean, with balance=", Want: "≤ 1.10", Ratio: plain, Status: NA,
				Note: fmt.Sprintf("balance= not measured: the plain cut's, average over %d global batches (worst %.3f)", j.FullBatches, j.RankMaxOverMeanWorst)}
		} else {
			t = atMost("vision tokens a rank, max ÷ mean, with balance="+bal.Balance, bal.RankMaxOverMean, 1.1)
			t.Note = fmt.Sprintf("average over %d global batches, worst %.3f; the plain cut %.3f (worst %.3f)", bal.FullBatches, bal.RankMaxOverMeanWorst, plain, j.RankMaxOverMeanWorst)
		}
		ts = append(ts, t)
	}
	if len(r.Trainer) == 2 {
		b, p := r.Trainer[0], r.Trainer[1]
		t := atMost("the trainer's CPU a sample, brand.Sequences(vision=) ÷ the Python collator", ratio(b.UsPer, p.UsPer), 1)
		t.Note = fmt.Sprintf("%.0f µs against %.0f µs; the collator's tokens the gateway's: %v", b.UsPer, p.UsPer, p.TokensEqual)
		ts = append(ts, t)
	}
	rates := r.tokenizerRates()
	if rates[tokSP] > 0 {
		t := atLeast("tokens per gateway core-second, byte-level BPE ÷ SentencePiece", rates[tokBPE]/rates[tokSP], 1)
		t.Note = fmt.Sprintf("%.2f M against %.2f M, cold epochs", rates[tokBPE]/1e6, rates[tokSP]/1e6)
		ts = append(ts, t)
	}
	return ts
}

// WriteJSON writes the report as JSON.
func (r *VisionReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes the report as markdown tables.
func (r *VisionReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	kinds := make([]string, 0, len(r.Kinds))
	for k, n := range r.Kinds {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	fmt.Fprintf(&sb, "Image-text samples: %d in %d tar shards (%s), %d images (mean %.0f pixels; %s), %s of text; indexed with `brand index --tokenizer` %s in %.1f s.\n",
		r.Samples, r.Shards, strings.Join(kinds, ", "), r.Images, r.MeanPixels, sizeString(r.ImageBytes), sizeString(r.TextBytes), r.Tokenizer, r.IndexSeconds)
	fmt.Fprintf(&sb, "Job: seq=%d, world %d × batch %d, pad=%d, vision=%s\n\n", r.Seq, r.World, r.BatchSize, r.Pad, r.Rule)
	sb.WriteString("| cut | sequences | samples | images | fill (read) | fill (/epoch) | spans aligned | vision tokens a rank, max ÷ mean (average) | (worst step) | global batches | /plan exact | gateway CPU µs a sample | samples/s |\n")
	sb.WriteString("| --- | --: | --: | --: | --: | --: | --- | --: | --: | --: | --- | --: | --: |\n")
	for _, j := range r.Jobs {
		cut := "plain"
		if j.Balance != "" {
			cut = "balance=" + j.Balance
		}
		fmt.Fprintf(&sb, "| %s | %d | %d | %d | %.4f | %.4f | %v | %.3f | %.3f | %d | %v | %.0f | %.1f |\n", cut, j.Sequences, j.Documents, j.Images,
			j.Fill, j.GatewayFill, j.SpansAligned, j.RankMaxOverMean, j.RankMaxOverMeanWorst, j.FullBatches, j.PlanExact, j.GatewayUsPer, j.SamplesPerSec)
	}
	sb.WriteString("\nThe trainer's CPU a sample (one epoch each, in one process):\n\n| loader | samples | sequences | images | s | CPU s | CPU µs a sample | fill | tokens = gateway's |\n| --- | --: | --: | --: | --: | --: | --: | --: | --- |\n")
	for _, t := range r.Trainer {
		fmt.Fprintf(&sb, "| %s | %d | %d | %d | %.2f | %.2f | %.0f | %.4f | %v |\n", visionLoaderLabels[t.Loader], t.Samples, t.Sequences, t.Images,
			t.Seconds, t.CPUSeconds, t.UsPer, t.Fill, t.TokensEqual)
	}
	fmt.Fprintf(&sb, "\nTokenizers on the gateway: %d documents of text (%s) in Parquet, indexed `--text text --tokenizer` with each; a cold epoch of seq=2048 through a fresh gateway a round:\n\n| round | tokenizer | file | vocabulary | tokens | s | gateway CPU s | tokens per gateway core-s |\n| --: | --- | --- | --: | --: | --: | --: | --: |\n",
		r.TextDocs, sizeString(r.CorpusBytes))
	for _, t := range r.Tokenizers {
		fmt.Fprintf(&sb, "| %d | %s | %s | %d | %d | %.2f | %.2f | %.2f M |\n", t.Round, t.Tokenizer, t.File, t.Vocabulary, t.Tokens, t.Seconds, t.GatewayCPU, t.TokensPerCore/1e6)
	}
	fmt.Fprintf(&sb, "\nLoad average at each stage: %s; %d CPUs (%s).\n\nTargets:\n", joinFloats(r.Load, 1), r.Machine.CPUs, r.Machine.CPUModel)
	for _, t := range r.Targets {
		fmt.Fprintf(&sb, "  %-4s %s: %.3f (want %s; %s)\n", t.Status, t.Name, t.Ratio, t.Want, t.Note)
	}
	fmt.Fprintf(&sb, "\n%s; %.0f s\n", r.Command, r.Seconds)
	_, err := io.WriteString(w, sb.String())
	return err
}
