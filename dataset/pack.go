package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/s3backend"
)

// Defaults applied to zero PackOptions and IndexOptions fields.
const (
	DefaultChunkSize   = 64 << 20
	DefaultParallel    = 4
	DefaultChunkPrefix = "chunks/"
	DefaultTool        = "brand"
)

// PackOptions configures Pack. The zero value packs 64 MiB chunks in sorted
// key order with 4 concurrent uploads.
type PackOptions struct {
	// ChunkSize is the target chunk size in bytes (default 64 MiB).
	// Samples are added to a chunk until it reaches the target, so chunks
	// are a little larger than the target except the last; a sample that
	// alone reaches the target gets a chunk of its own.
	ChunkSize int64

	// Shuffle writes the samples in a seeded random order rather than in
	// key order: a Fisher–Yates shuffle drawing from math/rand/v2's PCG
	// seeded with (Seed, 0x6272616e6470636b), the generator and loop that
	// docs/shuffle.md specifies, so the order never changes with the Go
	// version and its Python reference reproduces it. Class-folder trees list a class's samples
	// together, and a chunk-then-sample shuffle (package shuffle) over
	// class-sorted chunks mixes only the few classes of a window's chunks,
	// which costs accuracy; shuffling once at pack time makes every chunk a
	// uniform sample of the dataset. The CLI shuffles by default.
	Shuffle bool
	// Seed selects the order when Shuffle is set; the same tree and seed
	// always give the same chunks.
	Seed uint64

	// Parallel is the number of chunks built and uploaded concurrently
	// (default 4). Each holds a chunk in memory: see the package doc.
	Parallel int

	// Name is the dataset name in the manifest (default: the base name of
	// the source directory).
	Name string

	// ChunkPrefix is prepended to chunk keys (default "chunks/", giving
	// chunks/000000.tar, chunks/000001.tar, ...). It is a plain key prefix:
	// end it with '/' for a folder. It must not start with "_brand/".
	ChunkPrefix string

	// Overwrite allows packing into a store that already has an index.
	// Without it Pack fails with ErrExists before reading anything, since
	// replacing the chunks breaks whoever serves the current index.
	// Until the new index is stored, the old one names chunks being
	// replaced (reads of them fail with s3backend.ErrChanged). Chunks of
	// the old dataset beyond the new chunk count are left in place (a
	// Store cannot delete): they are not in the new index, but IndexShards
	// over the same prefix would find them.
	Overwrite bool

	// Tool is recorded in the manifest (default "brand"); the CLI passes
	// "brand <version>".
	Tool string

	// ModTime is the modification time of every member's tar header and
	// the manifest's Created, to the second (default: when Pack starts).
	// A batch passes the headers through, so `tar -tvf` of it shows when
	// its dataset was packed. Packing the same tree twice with the same
	// ModTime gives byte-identical chunks.
	ModTime time.Time

	// Progress, if set, is told how many chunks (with their bytes and
	// samples) are stored; see Progress.
	Progress func(Progress)
}

// Result is a dataset Pack or IndexShards has published.
type Result struct {
	Index    *chunkindex.Index
	Manifest chunkindex.Manifest
	// SkippedHidden counts the files and directories Pack left out because
	// their names start with '.' (always 0 for IndexShards).
	SkippedHidden int
	// Tokens is a token dataset's decoder (IndexInPlace with
	// format.Options.Tokens or Text, or a Megatron dataset): each
	// document's token count and the tokens' type; nil otherwise.
	Tokens format.Tokens
	// Decoder is a dataset served in place's decoder (IndexInPlace,
	// AppendInPlace), of format Manifest.InPlace.Format; nil for tar
	// chunks.
	Decoder format.Decoder
}

// Pack packs the directory tree src into tar chunks in dst and publishes an
// index and a manifest for them.
//
// Every file under src becomes a tar member named by its path relative to
// src with '/' separators (class-folder layouts such as
// n01440764/x.JPEG keep their folders), and files sharing a WebDataset key
// (chunkindex.SplitKey) form one sample. Regular files and symbolic links to
// regular files are packed; names starting with '.' are skipped with
// everything under them and counted in Result.SkippedHidden; anything else
// (dangling links, links to directories, devices, unreadable entries) fails
// the pack with an error naming the path. An empty tree fails with ErrEmpty.
//
// Samples are sorted by key, with their members sorted by name, then put in
// the seeded order of PackOptions.Shuffle. Members are written with mode 0644
// and PackOptions.ModTime (default: when the pack starts, which the
// manifest records as Created), so chunk bytes depend only on the file
// names, their contents, the options and the seed: packing the same tree
// twice with the same ModTime gives byte-identical chunks (and, on S3,
// where an ETag is a digest of the content, the same index ID). Chunk boundaries
// are planned from the file sizes before anything is read, so chunks are
// built and uploaded in parallel and are identical whatever Parallel is.
// A file whose size changes during the pack fails it.
//
// Chunks are stored as ChunkPrefix + "%06d.tar" (more digits beyond a
// million chunks), each with the exact size and the ETag the store reported,
// then the index, then the manifest: see the package doc.
func Pack(ctx context.Context, src string, dst s3backend.Store, opts PackOptions) (*Result, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return nil, fmt.Errorf("dataset: source %s: %w", src, err)
	}
	if err := opts.fill(abs); err != nil {
		return nil, err
	}
	if d, ok := dst.(interface{ Dir() string }); ok && within(d.Dir(), abs) {
		// A second pack would pack the first one's chunks and index.
		return nil, fmt.Errorf("dataset: the destination %s is inside the source %s", d.Dir(), abs)
	}
	if !opts.Overwrite {
		if err := checkNoIndex(ctx, dst); err != nil {
			return nil, err
		}
	}
	tree, err := scanSource(ctx, abs)
	if err != nil {
		return nil, err
	}
	if len(tree.samples) == 0 {
		return nil, fmt.Errorf("%w: %s has no files to pack (%d hidden entries skipped)", ErrEmpty, abs, tree.skipped)
	}
	res, err := packSource(ctx, tree, abs, dst, opts)
	if err != nil {
		return nil, err
	}
	res.SkippedHidden = tree.skipped
	return res, nil
}

// within reports whether path is dir or inside it; both are absolute.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// fill applies the defaults; src is the absolute source directory.
func (o *PackOptions) fill(src string) error {
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	if o.ChunkPrefix == "" {
		o.ChunkPrefix = DefaultChunkPrefix
	}
	if strings.HasPrefix(o.ChunkPrefix, "_brand/") {
		return fmt.Errorf("dataset: chunk prefix %q is inside the metadata folder _brand/", o.ChunkPrefix)
	}
	if o.Name == "" {
		o.Name = filepath.Base(src)
	}
	if o.Tool == "" {
		o.Tool = DefaultTool
	}
	if o.ModTime.IsZero() {
		o.ModTime = time.Now()
	}
	o.ModTime = o.ModTime.UTC().Truncate(time.Second)
	if o.ModTime.Unix() < 0 || o.ModTime.Unix() >= 1<<33 {
		// A ustar header holds 11 octal digits of seconds since 1970;
		// anything else would need a pax header the plan did not count.
		return fmt.Errorf("dataset: modification time %v is outside 1970 to 2242", o.ModTime)
	}
	return nil
}

// checkNoIndex fails with ErrExists if st has an index. It also makes an
// unreachable store fail before a long scan of the source.
func checkNoIndex(ctx context.Context, st s3backend.Store) error {
	_, err := st.Stat(ctx, chunkindex.IndexKey)
	switch {
	case err == nil:
		return fmt.Errorf("%w: an index is at %s", ErrExists, chunkindex.IndexKey)
	case errors.Is(err, s3backend.ErrNotFound):
		return nil
	default:
		return fmt.Errorf("dataset: checking the destination: %w", err)
	}
}

// chunkPlan is the samples of one chunk, by index into source.samples, and
// the chunk's size (the end-of-archive marker included).
type chunkPlan struct {
	samples []int
	size    int64
}

// planChunks cuts the samples, in the given order, into chunks of about
// target bytes.
func planChunks(tree *source, order []int, target int64) []chunkPlan {
	const trailer = int64(len(chunkindex.EndOfArchive))
	var (
		plans []chunkPlan
		cur   chunkPlan
	)
	flush := func() {
		if len(cur.samples) > 0 {
			cur.size += trailer
			plans = append(plans, cur)
			cur = chunkPlan{}
		}
	}
	for _, i := range order {
		n := tree.samples[i].tarSize
		if n+trailer >= target {
			flush() // a sample that alone reaches the target gets its own chunk
		}
		cur.samples = append(cur.samples, i)
		cur.size += n
		if cur.size+trailer >= target {
			flush()
		}
	}
	flush()
	return plans
}

// chunkKeyFormat returns the fmt format of chunk keys: six digits, or as
// many as the largest chunk number needs, so keys sort in chunk order.
func chunkKeyFormat(prefix string, chunks int) string {
	digits := len(fmt.Sprint(max(chunks-1, 0)))
	return fmt.Sprintf("%s%%0%dd.tar", strings.ReplaceAll(prefix, "%", "%%"), max(digits, 6))
}

// packSource writes tree's samples as chunks to dst and publishes the index
// and manifest.
func packSource(ctx context.Context, tree *source, abs string, dst s3backend.Store, opts PackOptions) (*Result, error) {
	order := make([]int, len(tree.samples))
	if opts.Shuffle {
		order = packOrder(len(order), opts.Seed)
	} else {
		for i := range order {
			order[i] = i
		}
	}
	plans := planChunks(tree, order, opts.ChunkSize)
	keyFormat := chunkKeyFormat(opts.ChunkPrefix, len(plans))
	total := Progress{TotalSamples: len(tree.samples), TotalChunks: len(plans)}
	for _, p := range plans {
		total.TotalBytes += p.size
	}
	prog := startTracker(opts.Progress, total)
	defer prog.stop()

	var (
		chunks  = make([]chunkindex.Chunk, len(plans))
		samples = make([][]chunkindex.Sample, len(plans))
		files   = make([][][]chunkindex.MemberInfo, len(plans))
	)
	g, gctx := errgroup.WithContext(ctx)
	jobs := make(chan int)
	g.Go(func() error {
		defer close(jobs)
		for c := range plans {
			select {
			case jobs <- c:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range min(opts.Parallel, len(plans)) {
		g.Go(func() error {
			var buf bytes.Buffer // reused: one chunk in memory per worker
			for c := range jobs {
				key := fmt.Sprintf(keyFormat, c)
				ss, fs, err := buildChunk(gctx, tree, c, plans[c], opts.ModTime, &buf)
				if err != nil {
					return fmt.Errorf("dataset: building %s: %w", key, err)
				}
				size := int64(buf.Len())
				info, err := dst.Put(gctx, key, bytes.NewReader(buf.Bytes()), size)
				if err != nil {
					return fmt.Errorf("dataset: storing %s: %w", key, err)
				}
				if info.Size != size {
					return fmt.Errorf("dataset: storing %s: the store reports %d bytes, %d were written", key, info.Size, size)
				}
				chunks[c] = chunkindex.Chunk{Key: key, Size: size, ETag: info.ETag, Samples: len(ss)}
				samples[c] = ss
				files[c] = fs
				prog.add(size, len(ss), 1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	prog.finish()

	all := make([]chunkindex.Sample, 0, len(tree.samples))
	for _, ss := range samples {
		all = append(all, ss...)
	}
	ix, err := chunkindex.New(chunks, all)
	if err != nil {
		return nil, fmt.Errorf("dataset: building the index: %w", err)
	}
	m := chunkindex.NewManifest(opts.Name, ix)
	m.ChunkTargetBytes = opts.ChunkSize
	m.Shuffled = opts.Shuffle
	if opts.Shuffle {
		m.ShuffleSeed = opts.Seed
	}
	m.Source = abs
	m.Tool = opts.Tool
	m.Created = opts.ModTime
	return publishPacked(ctx, dst, ix, m, slices.Concat(files...))
}

// buildChunk writes chunk c's samples into buf (reset first), each member
// with modTime, and returns their index entries and their members for the
// member table.
func buildChunk(ctx context.Context, tree *source, c int, plan chunkPlan, modTime time.Time, buf *bytes.Buffer) ([]chunkindex.Sample, [][]chunkindex.MemberInfo, error) {
	buf.Reset()
	buf.Grow(int(plan.size))
	cw := chunkindex.NewChunkWriter(buf)
	out := make([]chunkindex.Sample, 0, len(plan.samples))
	infos := make([][]chunkindex.MemberInfo, 0, len(plan.samples))
	var members []chunkindex.Member
	var files []memberFile
	for _, i := range plan.samples {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		s := &tree.samples[i]
		members, files = members[:0], files[:0]
		for _, f := range s.files {
			files = append(files, memberFile{path: f.path, size: f.size})
		}
		for j, f := range s.files {
			members = append(members, chunkindex.Member{Name: f.name, Size: f.size, ModTime: modTime, Body: &files[j]})
		}
		off, n, crc, fs, err := cw.WriteSampleFiles(s.key, members)
		for j := range files {
			files[j].close()
		}
		if err != nil {
			return nil, nil, err
		}
		out = append(out, chunkindex.Sample{Key: s.key, Chunk: c, Offset: off, Length: n, CRC: crc})
		infos = append(infos, fs)
	}
	if err := cw.Close(); err != nil {
		return nil, nil, err
	}
	return out, infos, nil
}

// memberFile is a source file opened on first read, so that a sample of many
// files holds one descriptor at a time, and checked to still have the size
// it was planned with.
type memberFile struct {
	path string
	size int64
	f    *os.File
	done bool
}

func (m *memberFile) Read(p []byte) (int, error) {
	if m.done {
		return 0, io.EOF
	}
	if m.f == nil {
		f, err := os.Open(m.path)
		if err != nil {
			return 0, fmt.Errorf("dataset: %w", err)
		}
		m.f = f
		fi, err := f.Stat()
		if err != nil {
			return 0, fmt.Errorf("dataset: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return 0, fmt.Errorf("dataset: %s is no longer a regular file", m.path)
		}
		if fi.Size() != m.size {
			return 0, fmt.Errorf("dataset: %s changed during the pack: %d bytes when listed, %d now", m.path, m.size, fi.Size())
		}
	}
	n, err := m.f.Read(p)
	switch {
	case err == io.EOF:
		m.close()
	case err != nil:
		err = fmt.Errorf("dataset: %w", err)
	}
	return n, err
}

func (m *memberFile) close() {
	if m.f != nil {
		m.f.Close()
		m.f = nil
	}
	m.done = true
}
