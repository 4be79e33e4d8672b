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
	bar := newProgressBar(&cli.Env{Stderr: &buf}, "pack")
	if bar != nil || bar.callback() != nil {
		t.Fatal("a bar on a non-terminal writer")
	}
	bar.update(dataset.Progress{Bytes: 1, TotalBytes: 2}) // a nil bar is inert
	bar.finish()
	if buf.Len() != 0 {
		t.Fatalf("a nil bar wrote %q", buf.String())
	}
}
