package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/s3backend"
)

// inspection is what `brand inspect` reports; --json prints it as is.
type inspection struct {
	URL string `json:"url"`
	// Manifest is absent if the store has none (publication was cut short
	// between the index and the manifest).
	Manifest *chunkindex.Manifest `json:"manifest,omitempty"`
	// ManifestProblem says why the manifest is missing, unreadable or does
	// not describe the index; the index is authoritative either way.
	ManifestProblem string       `json:"manifest_problem,omitempty"`
	Index           indexSummary `json:"index"`
	// Members summarises the member table (docs/format.md §5), absent if
	// there is none; MembersProblem says why.
	Members        *membersSummary       `json:"members,omitempty"`
	MembersProblem string                `json:"members_problem,omitempty"`
	Verify         *dataset.VerifyReport `json:"verify,omitempty"`
}

// membersSummary is what a member table holds: the samples' files by
// extension.
type membersSummary struct {
	Files      int            `json:"files"`
	Extensions map[string]int `json:"extensions"` // files per extension ("" for none)
}

func summarizeMembers(m *chunkindex.Members) *membersSummary {
	s := &membersSummary{Files: m.Len(), Extensions: map[string]int{}}
	for id := range m.NumSamples() {
		for j := range m.Count(id) {
			s.Extensions[m.Member(id, j).Ext]++
		}
	}
	return s
}

// indexSummary is what the index itself says about the dataset.
type indexSummary struct {
	ID             string `json:"id"`
	Chunks         int    `json:"chunks"`
	Samples        int    `json:"samples"`
	TotalBytes     int64  `json:"total_bytes"`
	SampleBytes    int64  `json:"sample_bytes"`
	AvgSampleBytes int64  `json:"avg_sample_bytes"`
	MinChunkBytes  int64  `json:"min_chunk_bytes"`
	AvgChunkBytes  int64  `json:"avg_chunk_bytes"`
	MaxChunkBytes  int64  `json:"max_chunk_bytes"`
	// InPlace is the format of a dataset served in place ("" for tar):
	// its chunk sizes are resident bounds, its samples sized when their
	// chunk is decoded (sample_bytes 0).
	InPlace string `json:"in_place,omitempty"`
	// Checksums is whether an index of a dataset served in place holds
	// the CRC32C of its chunks' ranges (brand index --checksums).
	Checksums bool `json:"checksums,omitempty"`
}

func summarize(ix *chunkindex.Index) indexSummary {
	s := indexSummary{
		ID: ix.ID(), Chunks: ix.NumChunks(), Samples: ix.NumSamples(),
		TotalBytes: ix.TotalBytes(), SampleBytes: ix.SampleBytes(), InPlace: ix.InPlace().Format, Checksums: ix.Checksummed(),
	}
	if s.Samples > 0 {
		s.AvgSampleBytes = s.SampleBytes / int64(s.Samples)
	}
	if s.Chunks > 0 {
		s.AvgChunkBytes = s.TotalBytes / int64(s.Chunks)
		s.MinChunkBytes = ix.Chunk(0).Size
		for c := range s.Chunks {
			size := ix.Chunk(c).Size
			s.MinChunkBytes = min(s.MinChunkBytes, size)
			s.MaxChunkBytes = max(s.MaxChunkBytes, size)
		}
	}
	return s
}

// runInspect is `brand inspect`: a dataset's summary and, with --verify,
// a check of every chunk against the index.
func runInspect(ctx context.Context, env *cli.Env, args []string) error {
	var (
		sf             cli.S3Flags
		src            string
		verify, asJSON bool
		parallel       int
	)
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.StringVar(&src, "src", "", "the dataset: s3://bucket/prefix, file:///dir or a directory")
	fs.BoolVar(&verify, "verify", false, "read every chunk and check its size, ETag and sample CRC32Cs against the index (a dataset served in place: decode every chunk); exit 1 on any problem")
	fs.BoolVar(&asJSON, "json", false, "print the summary (and verification report) as JSON")
	fs.IntVar(&parallel, "parallel", dataset.DefaultParallel, "with --verify, chunks read at once")
	sf.Register(fs)
	if err := cli.ParseFlags(fs, env, args, "brand inspect --src URL [--verify] [--json] [flags]"); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageError(env, "inspect", "unexpected argument %q", fs.Arg(0))
	case src == "":
		return errors.New("no --src given: name the dataset to inspect (s3://bucket/prefix or a directory)")
	case parallel < 1:
		return usageError(env, "inspect", "--parallel must be at least 1")
	}
	st, err := s3backend.Open(ctx, src, sf.Config())
	if err != nil {
		return err
	}
	ix, err := stored.ReadIndex(ctx, st)
	if err != nil {
		return err
	}
	out := inspection{URL: src, Index: summarize(ix)}
	m, err := stored.ReadManifest(ctx, st)
	switch {
	case errors.Is(err, s3backend.ErrNotFound):
		out.ManifestProblem = "no manifest: the dataset was published without one, or its publication was cut short"
	case err != nil && errors.Is(err, chunkindex.ErrCorrupt), err != nil && errors.Is(err, chunkindex.ErrVersion):
		out.ManifestProblem = err.Error()
	case err != nil:
		return err
	default:
		out.Manifest = &m
		if err := m.Describes(ix); err != nil {
			out.ManifestProblem = fmt.Sprintf("the manifest does not describe the index (stale?): %v", err)
		}
	}

	switch mt, err := stored.ReadMembers(ctx, st, ix); {
	case ix.Deferred():
		// A dataset served in place has no member table: its members are
		// known once its chunks are decoded.
	case errors.Is(err, stored.ErrNoMembers):
		out.MembersProblem = "no member table: the S3 face cannot list this dataset's files; `brand index` over its chunks adds one"
	case err != nil && (errors.Is(err, chunkindex.ErrCorrupt) || errors.Is(err, chunkindex.ErrVersion) || errors.Is(err, chunkindex.ErrTruncated)):
		out.MembersProblem = err.Error()
	case err != nil:
		return err
	default:
		out.Members = summarizeMembers(mt)
	}

	if verify {
		bar := newProgressBar(env, "verify")
		var rep *dataset.VerifyReport
		if ix.Deferred() {
			rep, err = verifyInPlace(ctx, st, ix, out.Manifest, parallel, sf, bar.callback())
		} else {
			rep, err = dataset.Verify(ctx, st, ix, parallel, bar.callback())
		}
		bar.finish()
		if err != nil {
			return err
		}
		out.Verify = rep
	}

	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printInspection(env.Stdout, &out)
	}
	if out.Verify == nil {
		return nil
	}
	switch n := len(out.Verify.Problems); {
	case n > 0:
		return fmt.Errorf("verification found %d problems", n)
	case out.Manifest != nil && out.ManifestProblem != "":
		// A manifest naming another index is a dataset published wrongly.
		return errors.New("verification: " + out.ManifestProblem)
	}
	return nil
}

func printInspection(w io.Writer, in *inspection) {
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "%-14s%s\n", k, fmt.Sprintf(format, args...)) }
	s := in.Index
	if m := in.Manifest; m != nil {
		row("dataset", "%s", m.Name)
	}
	row("url", "%s", in.URL)
	row("index", "%s", s.ID)
	row("chunks", "%s", humanize.Comma(int64(s.Chunks)))
	row("samples", "%s", humanize.Comma(int64(s.Samples)))
	row("total size", "%s (%s bytes)", humanize.IBytes(uint64(s.TotalBytes)), humanize.Comma(s.TotalBytes))
	if s.InPlace != "" {
		row("served in place", "%s: chunk sizes are resident bounds; samples are sized when their chunk is decoded", s.InPlace)
		if s.Checksums {
			row("checksums", "every range of the chunks' files, checked on every read")
		} else {
			row("checksums", "none: each file is pinned by its ETag (a local file: its size and modification time)")
		}
	} else {
		row("avg sample", "%s", humanize.IBytes(uint64(s.AvgSampleBytes)))
	}
	row("chunk size", "min %s, avg %s, max %s", humanize.IBytes(uint64(s.MinChunkBytes)),
		humanize.IBytes(uint64(s.AvgChunkBytes)), humanize.IBytes(uint64(s.MaxChunkBytes)))
	if m := in.Manifest; m != nil {
		if m.ChunkTargetBytes > 0 {
			row("chunk target", "%s", humanize.IBytes(uint64(m.ChunkTargetBytes)))
		}
		if ip := m.InPlace; ip != nil && len(ip.Skipped) > 0 {
			row("skipped", "%d files left out at index time, %s first (%s); the manifest's in_place.skipped names each and why",
				len(ip.Skipped), ip.Skipped[0].Key, ip.Skipped[0].Reason)
		}
		row("created", "%s", m.Created.Format(time.RFC3339))
		if m.Shuffled {
			row("shuffled", "yes, seed %d", m.ShuffleSeed)
		} else {
			row("shuffled", "no")
		}
		if m.Source != "" {
			row("source", "%s", m.Source)
		}
		if m.Tool != "" {
			row("tool", "%s", m.Tool)
		}
	}
	if m := in.Members; m != nil {
		exts := make([]string, 0, len(m.Extensions))
		for e, n := range m.Extensions {
			if e == "" {
				e = "(none)"
			}
			exts = append(exts, fmt.Sprintf("%s %s", e, humanize.Comma(int64(n))))
		}
		slices.Sort(exts)
		row("files", "%s (%s)", humanize.Comma(int64(m.Files)), strings.Join(exts, ", "))
	}
	if in.ManifestProblem != "" {
		row("warning", "%s", in.ManifestProblem)
	}
	if in.MembersProblem != "" {
		row("warning", "%s", in.MembersProblem)
	}
	if r := in.Verify; r != nil {
		if r.OK() {
			row("verify", "OK: %s chunks, %s samples, %s read", humanize.Comma(int64(r.Chunks)),
				humanize.Comma(int64(r.Samples)), humanize.IBytes(uint64(r.Bytes)))
		} else {
			row("verify", "%d problems:", len(r.Problems))
		}
	}
	if r := in.Verify; r != nil {
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
}

// verifyInPlace is --verify of a dataset served in place: every chunk read
// from where its manifest says the data is, and decoded.
func verifyInPlace(ctx context.Context, st s3backend.Store, ix *chunkindex.Index, m *chunkindex.Manifest, parallel int,
	sf cli.S3Flags, progress func(dataset.Progress)) (*dataset.VerifyReport, error) {
	dec, err := openFormat(ctx, st, ix, formats())
	if err != nil {
		return nil, err
	}
	data := st
	if m != nil && m.InPlace != nil && m.InPlace.Data != "" {
		if data, err = s3backend.Open(ctx, m.InPlace.Data, sf.Config()); err != nil {
			return nil, fmt.Errorf("opening the dataset's data at %s: %w", m.InPlace.Data, err)
		}
	}
	return dataset.VerifyInPlace(ctx, data, ix, dec, parallel, progress)
}
