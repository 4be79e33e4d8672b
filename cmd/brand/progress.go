package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"golang.org/x/term"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/cli"
)

// progressBar draws a one-line progress display (bytes, rate, ETA, chunks)
// on a terminal, redrawn in place with '\r'. When stderr is not a
// terminal (a log, a pipe) it writes the same figures as a plain line
// every logEvery instead, with no control characters.
type progressBar struct {
	w     io.Writer
	label string
	now   func() time.Time
	start time.Time
	last  time.Time // of the last redraw
	width int       // of the last line drawn, to blank what a shorter one leaves
	lines bool      // not a terminal: whole lines, every logEvery
}

// logEvery is how often progress is logged when stderr is not a terminal.
const logEvery = 5 * time.Second

// redrawEvery bounds the redraw rate: faster is unreadable and costs
// terminal output for nothing.
const redrawEvery = 100 * time.Millisecond

// newProgressBar returns a bar on env.Stderr: redrawn in place on a
// terminal, logged as lines otherwise. The methods of a nil bar do
// nothing, so callers need not check.
func newProgressBar(env *cli.Env, label string) *progressBar {
	f, ok := env.Stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return newProgressLog(env.Stderr, label, time.Now)
	}
	return newProgressBarTo(f, label, time.Now)
}

// newProgressLog returns a bar that writes a line every logEvery.
func newProgressLog(w io.Writer, label string, now func() time.Time) *progressBar {
	b := newProgressBarTo(w, label, now)
	b.lines, b.last = true, b.start
	return b
}

func newProgressBarTo(w io.Writer, label string, now func() time.Time) *progressBar {
	t := now()
	return &progressBar{w: w, label: label, now: now, start: t}
}

// callback returns the bar's update method as a dataset progress func, or
// nil for a nil bar (so the dataset package does no progress work at all).
func (b *progressBar) callback() func(dataset.Progress) {
	if b == nil {
		return nil
	}
	return b.update
}

// update redraws the bar, at most every redrawEvery except for the final
// figures (everything done), which are always drawn.
func (b *progressBar) update(p dataset.Progress) {
	if b == nil {
		return
	}
	now := b.now()
	final := p.TotalBytes > 0 && p.Bytes >= p.TotalBytes
	if b.lines {
		// A quick run logs nothing; a long one a line every logEvery and
		// its final figures.
		if now.Sub(b.last) < logEvery && !(final && b.width > 0) {
			return
		}
		b.last = now
		fmt.Fprintln(b.w, b.render(p, now.Sub(b.start)))
		b.width = 1
		if final {
			b.width = -1 // the final line is written: nothing more
		}
		return
	}
	if !final && b.width > 0 && now.Sub(b.last) < redrawEvery {
		return
	}
	b.last = now
	line := b.render(p, now.Sub(b.start))
	pad := max(b.width-len(line), 0)
	fmt.Fprintf(b.w, "\r%s%s", line, strings.Repeat(" ", pad))
	b.width = len(line)
}

// render formats one line, e.g.
//
//	pack  42% [########            ] 1.2 GiB / 2.8 GiB  85 MiB/s  ETA 19s  chunks 12/40
func (b *progressBar) render(p dataset.Progress, elapsed time.Duration) string {
	var s strings.Builder
	s.WriteString(b.label)
	if p.TotalBytes > 0 {
		frac := min(float64(p.Bytes)/float64(p.TotalBytes), 1)
		const cells = 20
		filled := int(frac * cells)
		fmt.Fprintf(&s, " %3d%% [%s%s] %s / %s", int(frac*100), strings.Repeat("#", filled), strings.Repeat(" ", cells-filled),
			humanize.IBytes(uint64(p.Bytes)), humanize.IBytes(uint64(p.TotalBytes)))
	} else {
		fmt.Fprintf(&s, " %s", humanize.IBytes(uint64(p.Bytes)))
	}
	if secs := elapsed.Seconds(); secs > 0 && p.Bytes > 0 {
		rate := float64(p.Bytes) / secs
		fmt.Fprintf(&s, "  %s/s", humanize.IBytes(uint64(rate)))
		if left := p.TotalBytes - p.Bytes; left > 0 {
			eta := time.Duration(float64(left) / rate * float64(time.Second))
			fmt.Fprintf(&s, "  ETA %s", eta.Round(time.Second))
		}
	}
	if p.TotalChunks > 0 {
		fmt.Fprintf(&s, "  chunks %d/%d", p.Chunks, p.TotalChunks)
	}
	return s.String()
}

// finish ends the bar's line so that what follows starts on a fresh one.
func (b *progressBar) finish() {
	if b == nil || b.width == 0 || b.lines {
		return
	}
	fmt.Fprintln(b.w)
	b.width = 0
}
