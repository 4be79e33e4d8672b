package dataset

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/s3backend"
)

// ProblemKind classifies what Verify found wrong.
type ProblemKind string

// Problems Verify reports.
const (
	// ChunkMissing: the chunk object does not exist.
	ChunkMissing ProblemKind = "chunk-missing"
	// ChunkChanged: the chunk's ETag is not the one indexed, so every pinned
	// read fails with s3backend.ErrChanged until the index is rebuilt. Its
	// samples are still checked, to tell a harmless rewrite (re-index) from
	// changed contents (repack).
	ChunkChanged ProblemKind = "etag-changed"
	// ChunkSizeDiffers: the chunk's size is not the one indexed.
	ChunkSizeDiffers ProblemKind = "size-differs"
	// SampleCRCMismatch: a sample's bytes do not match the indexed CRC32C.
	SampleCRCMismatch ProblemKind = "crc-mismatch"
	// SamplePastEnd: a sample's range extends past the end of the chunk.
	SamplePastEnd ProblemKind = "sample-past-end"
)

// Problem is one thing Verify found wrong.
type Problem struct {
	Kind     ProblemKind `json:"kind"`
	Chunk    int         `json:"chunk"`
	ChunkKey string      `json:"chunk_key"`
	// Sample and SampleKey identify the sample of a sample problem; Sample
	// is -1 for a chunk problem.
	Sample    int    `json:"sample"`
	SampleKey string `json:"sample_key,omitempty"`
	Detail    string `json:"detail"`
}

func (p Problem) String() string {
	if p.Sample >= 0 {
		return fmt.Sprintf("%s: chunk %d (%s) sample %d (%s): %s", p.Kind, p.Chunk, p.ChunkKey, p.Sample, p.SampleKey, p.Detail)
	}
	return fmt.Sprintf("%s: chunk %d (%s): %s", p.Kind, p.Chunk, p.ChunkKey, p.Detail)
}

// VerifyReport is the outcome of Verify.
type VerifyReport struct {
	Chunks   int       `json:"chunks"`     // chunks in the index
	Samples  int       `json:"samples"`    // samples in the index
	Bytes    int64     `json:"bytes_read"` // bytes read from the store
	Problems []Problem `json:"problems"`   // by chunk, then sample; empty if all is well
}

// OK reports whether Verify found no problem.
func (r *VerifyReport) OK() bool { return len(r.Problems) == 0 }

// Verify reads every chunk of ix from st and checks it against the index:
// that it exists, has the indexed size and ETag, and that every sample range
// has the indexed CRC32C. Up to parallel chunks (default 4) are read at once,
// each streamed by ranged reads pinned to the ETag Stat reports, so a chunk
// rewritten during verification is reported rather than read in pieces of
// two versions.
//
// Every problem is listed in the report, not just the first; the error is
// for failures to check at all (an unreachable store, a cancelled ctx).
func Verify(ctx context.Context, st s3backend.Store, ix *chunkindex.Index, parallel int, progress func(Progress)) (*VerifyReport, error) {
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	prog := startTracker(progress, Progress{
		TotalBytes: ix.TotalBytes(), TotalSamples: ix.NumSamples(), TotalChunks: ix.NumChunks(),
	})
	defer prog.stop()

	bufs := newPartBuffers(parallel) // one part buffer per running read
	return verifyEach(ctx, ix, parallel, prog, func(ctx context.Context, c int) ([]Problem, int64, error) {
		buf := bufs.take()
		defer bufs.give(buf)
		return verifyChunk(ctx, st, ix, c, buf, prog) // counts its bytes as it reads them
	})
}

// verifyEach checks every chunk of ix with check, parallel at once, and
// gathers what it found into one report, by chunk, then sample, then
// kind. check counts the bytes it reads on prog; verifyEach counts each
// chunk's samples as it is checked and finishes prog when every one is.
func verifyEach(ctx context.Context, ix *chunkindex.Index, parallel int, prog *tracker, check func(ctx context.Context, c int) ([]Problem, int64, error)) (*VerifyReport, error) {
	rep := &VerifyReport{Chunks: ix.NumChunks(), Samples: ix.NumSamples(), Problems: []Problem{}}
	var mu sync.Mutex // guards rep
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for c := range ix.NumChunks() {
		g.Go(func() error {
			probs, read, err := check(gctx, c)
			if err != nil {
				return err
			}
			_, n := ix.ChunkRange(c)
			prog.add(0, n, 1)
			mu.Lock()
			rep.Bytes += read
			rep.Problems = append(rep.Problems, probs...)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	prog.finish()
	slices.SortFunc(rep.Problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Chunk, b.Chunk), cmp.Compare(a.Sample, b.Sample), cmp.Compare(a.Kind, b.Kind))
	})
	return rep, nil
}

// verifyChunk checks chunk c and returns its problems and the bytes read.
func verifyChunk(ctx context.Context, st s3backend.Store, ix *chunkindex.Index, c int, buf []byte, prog *tracker) ([]Problem, int64, error) {
	want := ix.Chunk(c)
	chunkProblem := func(kind ProblemKind, format string, args ...any) Problem {
		return Problem{Kind: kind, Chunk: c, ChunkKey: want.Key, Sample: -1, Detail: fmt.Sprintf(format, args...)}
	}
	info, err := st.Stat(ctx, want.Key)
	if errors.Is(err, s3backend.ErrNotFound) {
		return []Problem{chunkProblem(ChunkMissing, "not in the store")}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("dataset: verifying chunk %d: %w", c, err)
	}
	var probs []Problem
	if want.ETag != "" && info.ETag != want.ETag {
		probs = append(probs, chunkProblem(ChunkChanged, "ETag %q, indexed %q", info.ETag, want.ETag))
	}
	if info.Size != want.Size {
		probs = append(probs, chunkProblem(ChunkSizeDiffers, "%d bytes, indexed %d", info.Size, want.Size))
	}

	// A partial index (chunkindex.Open) reads the chunk's table now, not
	// sample by sample below.
	release, err := ix.Tables().Prepare(ctx, []int{c})
	if err != nil {
		return nil, 0, fmt.Errorf("dataset: verifying chunk %d: %w", c, err)
	}
	defer release()

	// Read only as far as the last sample: the end-of-archive marker is not
	// served, and a shorter object must still have its samples checked.
	first, n := ix.ChunkRange(c)
	var end int64
	if n > 0 {
		_, off, length, _ := ix.SampleRange(first + n - 1)
		end = min(off+length, info.Size)
	}
	var read int64
	r := newObjectReader(ctx, st, s3backend.ObjectInfo{Key: want.Key, ETag: info.ETag, Size: end}, buf, func(k int64) {
		read += k
		prog.add(k, 0, 0)
	})
	var pos int64
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	for id := first; id < first+n; id++ {
		_, off, length, crc := ix.SampleRange(id)
		if off+length > info.Size {
			probs = append(probs, Problem{Kind: SamplePastEnd, Chunk: c, ChunkKey: want.Key, Sample: id, SampleKey: ix.SampleKey(id),
				Detail: fmt.Sprintf("range [%d, %d) is past the chunk's %d bytes", off, off+length, info.Size)})
			continue
		}
		_, err := io.CopyN(io.Discard, r, off-pos)
		if err == nil {
			h.Reset()
			_, err = io.CopyN(h, r, length)
		}
		switch {
		case errors.Is(err, s3backend.ErrChanged):
			return append(probs, chunkProblem(ChunkChanged, "rewritten while it was being verified")), read, nil
		case errors.Is(err, s3backend.ErrNotFound):
			return append(probs, chunkProblem(ChunkMissing, "deleted while it was being verified")), read, nil
		case err != nil:
			return nil, 0, fmt.Errorf("dataset: verifying chunk %d: %w", c, err)
		}
		pos = off + length
		if got := h.Sum32(); got != crc {
			probs = append(probs, Problem{Kind: SampleCRCMismatch, Chunk: c, ChunkKey: want.Key, Sample: id, SampleKey: ix.SampleKey(id),
				Detail: fmt.Sprintf("CRC32C %08x, indexed %08x", got, crc)})
		}
	}
	return probs, read, nil
}

// Problems of a dataset served in place.
const (
	// ChunkUndecodable: a chunk of a dataset served in place whose bytes
	// do not decode (package format: a bad page or frame, a codec error,
	// data that disagrees with the metadata indexed).
	ChunkUndecodable ProblemKind = "undecodable"
	// ChunkChecksum: bytes of a chunk's object that differ from the CRC32C
	// its index recorded (an index with checksums): changed or damaged
	// since it was indexed.
	ChunkChecksum ProblemKind = "checksum-mismatch"
)

// VerifyInPlace reads every chunk of the deferred index ix — the ranges
// of its object the format reads with every field, from data (the store
// its objects are in) — and decodes it with dec, as a gateway loading it
// would: it checks the object is there in the version indexed (its ETag,
// or a local file's identity), that its bytes have the CRC32Cs an index
// with checksums recorded, and that every chunk decodes, into no more
// than its resident bound or what it says it needs (format.GrowError).
// Problems are reported as Verify's.
func VerifyInPlace(ctx context.Context, data s3backend.Store, ix *chunkindex.Index, dec format.Decoder, parallel int, progress func(Progress)) (*VerifyReport, error) {
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	var total int64
	for c := range ix.NumChunks() {
		rs, _ := dec.Extent(c, nil)
		total += format.Concat(rs)
	}
	prog := startTracker(progress, Progress{TotalBytes: total, TotalSamples: ix.NumSamples(), TotalChunks: ix.NumChunks()})
	defer prog.stop()
	return verifyEach(ctx, ix, parallel, prog, func(ctx context.Context, c int) ([]Problem, int64, error) {
		probs, read, err := verifyDecoded(ctx, data, ix, dec, c)
		if err == nil {
			prog.add(read, 0, 0)
		}
		return probs, read, err
	})
}

// verifyDecoded reads and decodes chunk c of a dataset served in place.
func verifyDecoded(ctx context.Context, data s3backend.Store, ix *chunkindex.Index, dec format.Decoder, c int) ([]Problem, int64, error) {
	ch := ix.Chunk(c)
	obj := stored.ChunkObject(ch.Key)
	problem := func(kind ProblemKind, f string, args ...any) Problem {
		return Problem{Kind: kind, Chunk: c, ChunkKey: ch.Key, Sample: -1, Detail: fmt.Sprintf(f, args...)}
	}
	info, err := data.Stat(ctx, obj)
	if errors.Is(err, s3backend.ErrNotFound) {
		return []Problem{problem(ChunkMissing, "%s is not in the store", obj)}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("dataset: verifying chunk %d: %w", c, err)
	}
	rs, bound := dec.Extent(c, nil)
	src := make([]byte, format.Concat(rs))
	at := int64(0)
	for _, r := range rs {
		// Pinned to the version indexed: an ETag the store reports, or a
		// local file's identity, which no listing shows (Stat's is its
		// content's); a read of another version fails.
		if err := data.ReadRange(ctx, obj, ch.ETag, r.Off, src[at:at+r.Len]); err != nil {
			if errors.Is(err, s3backend.ErrChanged) || errors.Is(err, s3backend.ErrNotFound) {
				return []Problem{problem(ChunkChanged, "%s is not the version indexed (ETag %q, now %q): %v; index it again",
					obj, ch.ETag, info.ETag, err)}, at, nil
			}
			return nil, at, fmt.Errorf("dataset: verifying chunk %d: %w", c, err)
		}
		at += r.Len
	}
	if err := stored.CheckSpans(ix, c, obj, rs, src); err != nil {
		return []Problem{problem(ChunkChecksum, "%v", err)}, at, nil
	}
	dst := make([]byte, bound)
	err = dec.Decode(c, nil, src, dst, format.WriterOptions{ModTime: ix.InPlace().Created})
	var ge *format.GrowError
	if errors.As(err, &ge) {
		dst = make([]byte, ge.Need)
		err = dec.Decode(c, nil, src, dst, format.WriterOptions{ModTime: ix.InPlace().Created})
	}
	if err == nil {
		_, err = format.Verify(dst)
	}
	if err != nil {
		return []Problem{problem(ChunkUndecodable, "%v", err)}, at, nil
	}
	return nil, at, nil
}
