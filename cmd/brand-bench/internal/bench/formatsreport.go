package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/brandgw/brand/cmd/brand-bench/internal/chart"
	"github.com/dustin/go-humanize"
)

// relate sets each row's ratio to tar's row of the same round, loader and
// temperature.
func (r *FormatsReport) relate() {
	for i := range r.Rows {
		row := &r.Rows[i]
		for _, t := range r.Rows {
			if t.Format == formatTar && t.Round == row.Round && t.Loader == row.Loader && t.Cold == row.Cold {
				row.VsTar = ratio(row.SamplesPerSec, t.SamplesPerSec)
			}
		}
	}
}

// summary is each format, loader and temperature's median and range over
// the rounds, in the order the rows first appear.
func (r *FormatsReport) summary() []FormatTotal {
	type key struct {
		format, loader string
		cold           bool
	}
	var order []key
	sps, vs, gw, first := map[key][]float64{}, map[key][]float64{}, map[key][]float64{}, map[key][]float64{}
	for _, row := range r.Rows {
		k := key{row.Format, row.Loader, row.Cold}
		if _, ok := sps[k]; !ok {
			order = append(order, k)
		}
		sps[k], vs[k] = append(sps[k], row.SamplesPerSec), append(vs[k], row.VsTar)
		gw[k] = append(gw[k], 1e6*ratio(row.GatewayCPU, float64(row.Samples)))
		if row.FirstBatchMs > 0 {
			first[k] = append(first[k], row.FirstBatchMs)
		}
	}
	// Go before PyTorch, cold before warm, formats in their order.
	rank := func(k key) int {
		n := slices.Index(formatOrder, k.format)
		if !k.cold {
			n += 10
		}
		if k.loader == loaderTorch {
			n += 100
		}
		return n
	}
	slices.SortStableFunc(order, func(a, b key) int { return rank(a) - rank(b) })
	var out []FormatTotal
	for _, k := range order {
		out = append(out, FormatTotal{Format: k.format, Loader: k.loader, Cold: k.cold, SamplesPerSec: spread(sps[k]), VsTar: spread(vs[k]),
			GatewayMs: spread(gw[k]), FirstBatchMs: spread(first[k])})
	}
	return out
}

// targets are issue 41's: (1) the index of 10,000 files within 60 s and
// reading at most 0.1 % of the dataset's bytes; (2) Parquet's and MDS's
// samples/s at least 0.9× tar's, cold and warm, and the projected job's
// store bytes at most 1.05× the projected columns'.
//
// A rate is judged on the median of the rounds' ratios, as brand-bench
// resize judges its latencies (the median over pairs), with every round
// and the worst in the note. The worst of n rounds is no
// estimate of a rate: on two cores shared by three processes one round
// of any format swings by ±0.1 (MDS, whose path no round changes, from
// 0.86 to 1.12 of tar's in one run), so the more rounds a run has the
// lower its worst falls. Store bytes, which do not swing, are judged on
// the largest epoch's.
func (r *FormatsReport) targets() []Target {
	var ts []Target
	for i, run := range r.Index {
		if i == 0 {
			t := atMost(fmt.Sprintf("(1) brand index of %s Parquet files, seconds", humanize.Comma(int64(run.Files))), run.Seconds, 60)
			if run.Files < 10000 {
				t.Status, t.Note = NA, "the target is for 10,000 files"
			}
			ts = append(ts, t)
		}
		t := atMost(fmt.Sprintf("(1) bytes read indexing ÷ the dataset's, %s files of mean %s", humanize.Comma(int64(run.Files)), sizeString(run.Bytes/int64(max(run.Files, 1)))),
			run.Fraction, 0.001)
		t.Want = "≤ 0.001"
		t.Note = fmt.Sprintf("%s a file", sizeString((run.ListBytes+run.GetBytes)/int64(max(run.Files, 1))))
		ts = append(ts, t)
	}
	for _, f := range []string{formatParquet, formatMDS} {
		for _, cold := range []bool{true, false} {
			var v []float64
			for _, row := range r.Rows {
				if row.Format == f && row.Loader == loaderGo && row.Cold == cold {
					v = append(v, row.VsTar)
				}
			}
			if len(v) == 0 {
				continue
			}
			t := atLeast(fmt.Sprintf("(2) %s ÷ tar samples/s, %s epoch, the median round", f, temperature(cold)), spread(v)[0], 0.9)
			t.Note = fmt.Sprintf("rounds: %s; the worst %.3f", joinFloats(v, 3), slices.Min(v))
			ts = append(ts, t)
		}
	}
	var proj []float64
	for _, row := range r.Rows {
		if row.Format == formatParquet && row.Cold {
			proj = append(proj, ratio(float64(row.StoreBytes), float64(r.ProjectedBytes)))
		}
	}
	if len(proj) > 0 {
		t := atMost("(2) Parquet, columns=image,label: store bytes of a cold epoch ÷ the projected columns' bytes", slices.Max(proj), 1.05)
		t.Note = "cold epochs: " + joinFloats(proj, 4)
		ts = append(ts, t)
	}
	return ts
}

func temperature(cold bool) string {
	if cold {
		return "cold"
	}
	return "warm"
}

// WriteJSON writes the report as JSON.
func (r *FormatsReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes the report as markdown tables.
func (r *FormatsReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	sb.WriteString("(1) brand index --src (the data) --dst (another prefix), through a counting proxy in front of MinIO\n\n")
	sb.WriteString("| Parquet files | rows | dataset | seconds | CPU s | listings | GETs | bytes read | ÷ dataset | read a file |\n| --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |\n")
	for _, run := range r.Index {
		fmt.Fprintf(&sb, "| %s of mean %s | %s | %s | %.1f | %.1f | %d (%s) | %d (%s) | %s | %.4f %% | %s |\n",
			humanize.Comma(int64(run.Files)), sizeString(run.Bytes/int64(max(run.Files, 1))), humanize.Comma(int64(run.Rows)), sizeString(run.Bytes),
			run.Seconds, run.CPU, run.ListRequests, sizeString(run.ListBytes), run.GetRequests, sizeString(run.GetBytes),
			sizeString(run.ListBytes+run.GetBytes), 100*run.Fraction, sizeString((run.ListBytes+run.GetBytes)/int64(max(run.Files, 1))))
	}
	fmt.Fprintf(&sb, "\n(2), (3) %d photos (internal/gen/photos) of mean %s, batch %d, window %d chunks:\n\n", r.Config.Images, sizeString(r.MeanBytes), r.Config.BatchSize, r.Config.Window)
	sb.WriteString("| format | objects | chunks | bytes in the store |\n| --- | --: | --: | --: |\n")
	for _, d := range r.Datasets {
		label := formatLabel(d.Format)
		switch {
		case d.Format == formatParquet && r.Config.ParquetSinglePut:
			label += "; each file uploaded in one PUT"
		case d.Format == formatParquet:
			label += "; a file over 16 MiB uploaded in parts of 16 MiB"
		}
		fmt.Fprintf(&sb, "| %s | %d | %d | %s |\n", label, d.Objects, d.Chunks, sizeString(d.Bytes))
	}
	fmt.Fprintf(&sb, "\nParquet's projected job (columns=image,label) must read %s: the image and label column chunks' total_compressed_size.\n\n", sizeString(r.ProjectedBytes))
	sb.WriteString("| loader | epoch | format | samples/s | ÷ tar | gateway CPU ms per 1,000 samples | first batch ms |\n| --- | --- | --- | --: | --: | --: | --: |\n")
	for _, t := range r.Summary {
		first := "—"
		if t.FirstBatchMs[0] > 0 {
			first = spreadString(t.FirstBatchMs, 0)
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s |\n", loaderLabel(t.Loader), temperature(t.Cold), t.Format, spreadString(t.SamplesPerSec, 0),
			spreadString(t.VsTar, 3), spreadString(t.GatewayMs, 0), first)
	}
	sb.WriteString("\nMedian (min–max) over the rounds. Every epoch:\n\n")
	sb.WriteString("| round | loader | epoch | format | epochs | samples/s | ÷ tar | MB/s | first batch ms | store GETs | store MB | loader CPU s | gateway CPU s | gateway page faults | MinIO CPU s |\n| --: | --- | --- | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |\n")
	for _, row := range r.Rows {
		first := "—"
		if row.FirstBatchMs > 0 {
			first = fmt.Sprintf("%.0f", row.FirstBatchMs)
		}
		fmt.Fprintf(&sb, "| %d | %s | %s | %s | %d | %.0f | %.3f | %.1f | %s | %d | %.1f | %.2f | %.2f | %d | %.2f |\n", row.Round, row.Loader, temperature(row.Cold), row.Format, row.Epochs,
			row.SamplesPerSec, row.VsTar, ratio(float64(row.Bytes), row.Seconds)/1e6, first, row.StoreRequests, float64(row.StoreBytes)/1e6, row.LoaderCPU, row.GatewayCPU, row.GatewayFaults, row.StoreCPU)
	}
	fmt.Fprintf(&sb, "\nStore GETs and bytes: response bodies of the epoch's requests to the format's objects, counted by the proxy. Gateway page faults: its minor faults during the epoch (/proc), each a first touch of fresh memory. Load average before each round: %s. %d CPUs. Before the first round every object of the three datasets was read once from MinIO, to no epoch's account (%s): cold is the gateway's cache, not the store's.", joinFloats(r.Load, 1), r.Machine.CPUs, sizeString(r.Primed))
	if r.PythonSkipped != "" {
		fmt.Fprintf(&sb, " (3) skipped: %s.", r.PythonSkipped)
	} else {
		fmt.Fprintf(&sb, " (3): %s, %s, %d DataLoader workers.", r.Python, r.Versions, r.Config.Workers)
	}
	if len(r.Replays) > 0 {
		sb.WriteString("\n\n" + r.replayText())
	}
	sb.WriteString("\n\nTargets:\n")
	for _, t := range r.Targets {
		note := ""
		if t.Note != "" {
			note = "; " + t.Note
		}
		fmt.Fprintf(&sb, "  %-4s %s: %.4g (want %s%s)\n", t.Status, t.Name, t.Ratio, t.Want, note)
	}
	fmt.Fprintf(&sb, "\n%s; %.0f s\n", r.Command, r.Seconds)
	_, err := io.WriteString(w, sb.String())
	return err
}

func formatLabel(f string) string {
	switch f {
	case formatParquet:
		return "Parquet, the Hub's layout (arrow-go, snappy, dictionary), with an embedding column"
	case formatMDS:
		return "MDS (raw shards, jpeg and int columns)"
	}
	return "Brand tar chunks (brand pack)"
}

func loaderLabel(l string) string {
	if l == loaderTorch {
		return "PyTorch DataLoader over BrandDataset"
	}
	return "Go client"
}

// formatColors are the chart's bar colours by format.
var formatColors = map[string]string{
	formatTar:     colorGrey,
	formatParquet: colorBlue,
	formatMDS:     colorOrange,
}

// Chart is each format's samples/s (the median over the rounds) by loader
// and temperature as a bar chart, its ratio to tar in the labels.
func (r *FormatsReport) Chart() (*chart.Chart, error) {
	n := len(r.Summary)
	if n == 0 {
		return nil, chart.ErrEmpty
	}
	c := &chart.Chart{
		Title:      fmt.Sprintf("An epoch of %d photos (mean %s) from Parquet, MDS and tar, served in place", r.Config.Images, sizeString(r.MeanBytes)),
		Width:      10 * 72,
		Height:     float64(n)*20 + 1.5*72,
		X:          chart.Axis{Label: "samples/s (higher is better); labels: ÷ tar's of the same loader and epoch", CommaTicks: true},
		Categories: make([]string, n),
		Horizontal: true,
	}
	for _, f := range formatOrder {
		vals := make([]float64, n)
		found := false
		for i, t := range r.Summary {
			if t.Format == f {
				vals[n-1-i], found = t.SamplesPerSec[0], true
			}
		}
		if found {
			c.Bars = append(c.Bars, chart.Bars{Color: formatColors[f], Width: 14, Values: vals})
		}
	}
	top := 0.0
	for i, t := range r.Summary {
		y := n - 1 - i
		c.Categories[y] = fmt.Sprintf("%s, %s: %s", map[string]string{loaderGo: "Go", loaderTorch: "PyTorch"}[t.Loader], temperature(t.Cold), t.Format)
		c.Labels = append(c.Labels, chart.Label{X: t.SamplesPerSec[0], Y: float64(y),
			Text: fmt.Sprintf(" %s (%.2f×)", humanize.Commaf(math.Round(t.SamplesPerSec[0])), t.VsTar[0])})
		top = max(top, t.SamplesPerSec[0])
	}
	c.X.Min, c.X.Max = chart.Bound(0), chart.Bound(1.3*top)
	return c, nil
}

// replayText is the store-alone table: MinIO's CPU for each format's
// recorded GETs replayed, beside its CPU in the cold Go epochs.
func (r *FormatsReport) replayText() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "The store alone: each format's first cold epoch's GETs (its objects and ranges, recorded by the proxy) replayed %d times against MinIO, %d at a time, nothing else running; beside it, MinIO's CPU in the cold epochs of the Go client with the gateway and the client on the same cores (median (min–max)):\n\n",
		r.Config.StoreReplays, replayParallel)
	sb.WriteString("| format | GETs | MB | MinIO CPU s, replayed | ÷ tar | MinIO CPU s, in the epochs | ÷ tar |\n| --- | --: | --: | --: | --: | --: | --: |\n")
	var tarReplay, tarEpoch float64
	for _, rep := range r.Replays {
		var epochs []float64
		for _, row := range r.Rows {
			if row.Format == rep.Format && row.Loader == loaderGo && row.Cold {
				epochs = append(epochs, row.StoreCPU)
			}
		}
		replayed, inEpochs := spread(rep.MinIOCPU), spread(epochs)
		if rep.Format == formatTar {
			tarReplay, tarEpoch = replayed[0], inEpochs[0]
		}
		fmt.Fprintf(&sb, "| %s | %d | %.1f | %s | %.3f | %s | %.3f |\n", rep.Format, rep.GETs, float64(rep.Bytes)/1e6,
			spreadString(replayed, 2), ratio(replayed[0], tarReplay), spreadString(inEpochs, 2), ratio(inEpochs[0], tarEpoch))
	}
	return strings.TrimSuffix(sb.String(), "\n")
}
