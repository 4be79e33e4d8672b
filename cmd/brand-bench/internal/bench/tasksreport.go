package bench

import (
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes the report as JSON.
func (r *TasksReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes the report as markdown tables.
func (r *TasksReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	c, b, p := r.Config, r.Brand, r.Brand.Plan
	where := "an external gateway at " + c.Gateway
	if r.InProcess {
		where = fmt.Sprintf("a gateway in this process on 127.0.0.1 over a local store (dataset built in %.1f s, loaded in %.1f s)", r.BuildSecs, r.LoadSecs)
	}
	fmt.Fprintf(&sb, "A task job over %d prompts of dataset %s, through %s: step %d, ahead %d, policy %s, redraws %d, retire %d; %d generators leasing %d prompts at a time, each answered with %d scores of a toy model whose pass rate rises with the trainer's step; a trainer reading %d steps in order. %d CPUs.\n\n",
		p.Prompts, c.Dataset, where, c.Step, c.Ahead, c.Policy, c.Redraws, c.Retire, c.Gens, c.Lease, c.Answers, c.Steps, r.Machine.CPUs)

	sb.WriteString("| figure | value |\n| --- | --: |\n")
	row := func(name, format string, a ...any) {
		fmt.Fprintf(&sb, "| %s | "+format+" |\n", append([]any{name}, a...)...)
	}
	row("steps read by the trainer", "%d in %.2f s", b.StepsRead, b.Seconds)
	row("leases/s (a node)", "%.0f", b.LeasesPerSec)
	row("prompts leased/s (a node)", "%.0f", b.PromptsPerSec)
	row("feedback rows/s", "%.0f", b.RowsPerSec)
	row("leases refused (503, the window)", "%d", b.Refused)
	row("lease latency mean / p50 / p99, ms", "%.2f / %.2f / %.2f", b.LeaseMeanMs, b.LeaseP50Ms, b.LeaseP99Ms)
	row("trainer's wait a step, mean ms", "%.2f", b.StepWaitMeanMs)
	row("log bytes", "%d", p.LogBytes)
	row("log bytes a feedback row", "%.1f", b.BytesPerRow)
	row("log bytes a step", "%.0f", b.BytesPerStep)
	row("segments", "%d", p.Segments)
	row("segments a step", "%.2f", b.SegmentsPerStp)
	row("feedback rows a segment", "%.1f", b.RowsPerSegment)
	row("GET /tasks/{job} (counts every prompt), ms", "%.1f", b.PlanMs)
	row("plan: leases, feedback rows, counted, redrawn, rested, retired", "%d, %d, %d, %d, %d, %d", p.Leases, p.FeedbackRows, p.Counted, p.Redrawn, p.Rested, p.Retired)
	cpuWho := "this process"
	if r.InProcess {
		cpuWho = "this process: the gateway, the generators' and the trainer's HTTP clients, the toy model"
	}
	row("CPU-s ("+cpuWho+")", "%.2f", b.CPUSeconds)
	row("CPU-s per 1,000 prompts leased, Brand", "%.3f", b.CPUPer1000)
	if py := r.Python; py != nil {
		row("CPU-s per 1,000 prompts leased, Python in-process sampler", "%.3f", py.CPUPer1000)
		row("Brand ÷ Python, CPU per prompt", "%.2f", r.CPURatio)
	}

	if py := r.Python; py != nil {
		fmt.Fprintf(&sb, "\nThe same policy as an in-process Python sampler (python/bench/tasks_sampler.py, %s %s, standard library only; a sum tree over the pass's weights): %d steps, %d leases, %d prompts leased, %d feedback rows (%d counted, %d redrawn, %d rested, %d retired, %d leases refused by the window) in %.2f s, %.2f CPU-s over the sampling loop; building its state over %d prompts took %.2f s (%.2f CPU-s, not counted).\n",
			py.Interpreter, py.Version, py.Steps, py.Leases, py.Prompts, py.FeedbackRows, py.Counted, py.Redrawn, py.Rested, py.Retired, py.Refused,
			py.Seconds, py.CPUSeconds, c.Prompts, py.SetupSeconds, py.SetupCPU)
	} else if r.PySkipped != "" {
		fmt.Fprintf(&sb, "\nPython sampler: skipped (%s).\n", r.PySkipped)
	}
	fmt.Fprintf(&sb, "\nMaking the job took %.3f s. %s. Load average at the end: %.1f.\n\nTargets:\n", r.MakeSecs, r.ReplanNote, r.Load)
	for _, t := range r.Targets {
		fmt.Fprintf(&sb, "  %-4s %s: %.1f (want %s)\n", t.Status, t.Name, t.Ratio, t.Want)
		if t.Note != "" {
			fmt.Fprintf(&sb, "       (%s)\n", t.Note)
		}
	}
	fmt.Fprintf(&sb, "\n%s; %.0f s\n", r.Command, r.Seconds)
	_, err := io.WriteString(w, sb.String())
	return err
}
