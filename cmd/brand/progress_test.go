package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/cli"
)

func TestProgressBar(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	bar := newProgressBarTo(&out, "pack", clock)
	const mib = 1 << 20

	now = now.Add(2 * time.Second)
	bar.update(dataset.Progress{Bytes: 100 * mib, TotalBytes: 400 * mib, Chunks: 1, TotalChunks: 4})
	want := "\rpack  25% [#####               ] 100 MiB / 400 MiB  50 MiB/s  ETA 6s  chunks 1/4"
	if out.String() != want {
		t.Fatalf("first draw\n got %q\nwant %q", out.String(), want)
	}

	// Within 100 ms of the last draw: nothing.
	out.Reset()
	now = now.Add(50 * time.Millisecond)
	bar.update(dataset.Progress{Bytes: 101 * mib, TotalBytes: 400 * mib, Chunks: 1, TotalChunks: 4})
	if out.Len() != 0 {
		t.Fatalf("redrawn after 50 ms: %q", out.String())
	}

	// The final figures are drawn at once, padded over the longer line.
	now = now.Add(10 * time.Millisecond)
	bar.update(dataset.Progress{Bytes: 400 * mib, TotalBytes: 400 * mib, Chunks: 4, TotalChunks: 4})
	line := "pack 100% [####################] 400 MiB / 400 MiB  194 MiB/s  chunks 4/4"
	if got := out.String(); !strings.HasPrefix(got, "\r"+line) || strings.TrimRight(got, " ") != "\r"+line || len(got) < len(want) {
		t.Fatalf("final draw %q", got)
	}
	out.Reset()
	bar.finish()
	if out.String() != "\n" {
		t.Fatalf("finish wrote %q", out.String())
	}

	// Unknown totals show bytes only.
	out.Reset()
	bar = newProgressBarTo(&out, "index", clock)
	bar.update(dataset.Progress{})
	if out.String() != "\rindex 0 B" {
		t.Fatalf("empty progress drew %q", out.String())
	}
}

func TestProgressBarOnlyOnTerminals(t *testing.T) {
	var buf bytes.Buffer
	if bar := newProgressBar(&cli.Env{Stderr: &buf}, "pack"); bar == nil || !bar.lines {
		t.Fatal("a non-terminal writer gets no progress log")
	}
	var bar *progressBar
	if bar.callback() != nil {
		t.Fatal("a nil bar has a callback")
	}
	bar.update(dataset.Progress{Bytes: 1, TotalBytes: 2}) // a nil bar is inert
	bar.finish()
	if buf.Len() != 0 {
		t.Fatalf("a nil bar wrote %q", buf.String())
	}
}

// TestProgressLog checks progress off a terminal: a plain line every
// logEvery and the final figures, no control characters, nothing for a
// quick run.
func TestProgressLog(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name  string
		steps []time.Duration // elapsed time of each update; the last is final
		lines int
	}{
		{"quick run logs nothing", []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, 0},
		{"one line per interval, then the final figures", []time.Duration{time.Second, 5 * time.Second, 6 * time.Second, 10 * time.Second, 11 * time.Second}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now := start
			bar := newProgressLog(&out, "pack", func() time.Time { return now })
			for i, d := range tt.steps {
				now = start.Add(d)
				n := int64(i+1) * 100 * mib / int64(len(tt.steps))
				bar.update(dataset.Progress{Bytes: n, TotalBytes: 100 * mib, Chunks: i + 1, TotalChunks: len(tt.steps)})
			}
			bar.finish()
			got := out.String()
			if strings.ContainsAny(got, "\r\x1b") || strings.Count(got, "\n") != tt.lines {
				t.Fatalf("logged %q, want %d plain lines", got, tt.lines)
			}
			if tt.lines > 0 && !strings.HasSuffix(got, "pack 100% [####################] 100 MiB / 100 MiB  9.1 MiB/s  chunks 5/5\n") {
				t.Fatalf("last line of %q is not the final figures", got)
			}
		})
	}
}
