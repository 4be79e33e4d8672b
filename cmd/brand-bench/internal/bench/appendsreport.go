package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteJSON writes the report as indented JSON: appends.json.
func (rep *AppendsReport) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteText writes a row a round: appends.txt, and the markdown of
// docs/benchmarks.md (the table is valid markdown).
func (rep *AppendsReport) WriteText(w io.Writer) error {
	var b bytes.Buffer
	c := rep.Config
	fmt.Fprintf(&b, "%d Parquet files of %d rows of %d B to start with, %d appended a round; batch %d, window %d, a %s step, --index-poll %s; %s\n",
		c.Files, c.RowsPerFile, c.RowBytes, c.NewFiles, c.BatchSize, c.Window, c.StepTime, c.IndexPoll, rep.Command)
	fmt.Fprintf(&b, "brand index of the first %d files: %.2f s, %d GETs (%s) of %s\n\n",
		rep.Base.Files, rep.Base.Seconds, rep.Base.GetRequests, sizeString(rep.Base.GetBytes), sizeString(rep.Base.Bytes))
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "| round\t| files before\t| appended\t| brand index --append\t| its reads\t| reload\t| POST\t| record from step (loop at)\t| first new batch\t| last file written → first new batch\t|")
	fmt.Fprintln(tw, "| --:\t| --:\t| --\t| --:\t| --\t| --:\t| --:\t| --:\t| --\t| --:\t|")
	for _, r := range rep.Rounds {
		ix := r.Index
		fmt.Fprintf(tw, "| %d\t| %d\t| %d files, %d rows, %s\t| %.2f s (CPU %.2f s)\t| %d listings, %d footer GETs (%s), index %d GETs (%s)\t| %.2f s\t| %.3f s (%d)\t| %d (%d)\t| step %d, %d new rows, %.2f s after\t| **%.2f s**\t|\n",
			r.Round, r.FilesBefore, r.NewFiles, r.NewSamples, sizeString(r.NewBytes), ix.Seconds, ix.CPU,
			ix.ListRequests, ix.GetRequests, sizeString(ix.GetBytes), r.IndexGets, sizeString(r.IndexGetBytes),
			r.ReloadSeconds, r.PostSeconds, r.Posts, r.Record.FromStep, r.StepAtPost, r.FirstStep, r.FirstRows, r.FirstSeconds, r.TotalSeconds)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nLast file written → first new batch: median %.2f s (%.2f–%.2f) over %d rounds. Reload: brand index's exit to /datasets naming the new version. POST: the record made, the first POST (from step 0) told the first step it could start at. The new files' footers: %.4f of their bytes read.\n",
		rep.Total[0], rep.Total[1], rep.Total[2], len(rep.Rounds), footerFraction(rep.Rounds))
	if x := rep.Exclusion; x != nil {
		fmt.Fprintf(&b, "\n(5) Epoch 0 of the %d files, each read whole by a fresh gateway; the list names every row of %d files (%s) and one row of each of %d others: %d keys, %d chunks emptied.\n\n",
			x.Files, x.EmptiedFiles, sizeString(x.EmptiedBytes), x.RowsNamed, x.Keys, x.Record.EmptyChunks)
		tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
		fmt.Fprintln(tw, "| epoch 0\t| samples\t| store GETs\t| store bytes\t| /plan's prediction\t| seconds\t|")
		fmt.Fprintln(tw, "| --\t| --:\t| --:\t| --:\t| --:\t| --:\t|")
		for _, e := range []struct {
			name string
			ExclusionEpoch
		}{{"without a list", x.Plain}, {fmt.Sprintf("under the list of %d keys", x.Keys), x.Listed}} {
			fmt.Fprintf(tw, "| %s\t| %d\t| %d\t| %d\t| %d\t| %.2f\t|\n", e.name, e.Samples, e.StoreRequests, e.StoreBytes, e.PlanBytes, e.Seconds)
		}
		fmt.Fprintf(tw, "| saved\t| %d\t| %d\t| **%d (%.1f %%)**\t| %d\t| \t|\n", x.Plain.Samples-x.Listed.Samples, x.Plain.StoreRequests-x.Listed.StoreRequests,
			x.Plain.StoreBytes-x.Listed.StoreBytes, 100*ratio(float64(x.Plain.StoreBytes-x.Listed.StoreBytes), float64(x.Plain.StoreBytes)), x.Plain.PlanBytes-x.Listed.PlanBytes)
		tw.Flush()
	}
	_, err := w.Write(b.Bytes())
	return err
}

// footerFraction is the rounds' bytes read by brand index --append of the
// new files, over those files' bytes.
func footerFraction(rounds []AppendsRound) float64 {
	var read, total int64
	for _, r := range rounds {
		read, total = read+r.Index.GetBytes, total+r.NewBytes
	}
	return ratio(float64(read), float64(total))
}
