package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/imagesize"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/tokenize"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/vision"
)

// runIndex is `brand index`: index a dataset where it is, never
// rewriting or copying its objects — tar shards (a WebDataset dataset, or
// chunks whose index must be rebuilt), or a dataset of a format served in
// place (Parquet, MDS, Megatron, videos, LeRobot: formats()), recognised from its listing
// or named by --format — writing the index, the manifest and the member
// table or the format's description to --src or to --dst. Run over a
// dataset packed before member tables, it adds one (docs/format.md §5).
func runIndex(ctx context.Context, env *cli.Env, args []string) error {
	var (
		sf                              cli.S3Flags
		src, dst, prefix, name, fmtName string
		members                         string
		tok                             tokenFlags
		chunk                           cli.ByteSize
		parallel                        int
		appendNew, skipBad, sizes       bool
		checksums                       optionalBool
	)
	fs := flag.NewFlagSet("index", flag.ContinueOnError)
	fs.StringVar(&src, "src", "", "store holding the dataset: s3://bucket/prefix, file:///dir or a directory; the index is written there unless --dst is given")
	fs.StringVar(&dst, "dst", "", "where to write the index, manifest and format description, when not beside the data (a read-only mirror); a dataset served in place only")
	fs.StringVar(&fmtName, "format", "", "the dataset's format: "+formatNames()+" (default: recognised from the objects listed)")
	fs.StringVar(&prefix, "prefix", "", "index only the objects whose keys (relative to --src) start with this")
	fs.StringVar(&name, "name", "", "dataset name in the manifest (default: the last segment of the prefix or URL)")
	fs.StringVar(&members, "members", "", "member extensions by field, comma-separated (label=cls,caption=txt), overriding the format's mapping (docs/format.md)")
	fs.Var(&chunk, "chunk-size", "target chunk size for formats that cut their own chunks (Megatron: spans of a .bin, default 64MiB; Parquet: consecutive row groups of a file, default 16MiB; video: runs of GOPs of a file, default 8MiB); a dataset indexed before is cut at the size its manifest records unless this is given, and the same files indexed the same way keep their index version")
	fs.IntVar(&parallel, "parallel", dataset.DefaultParallel, "shards (tar), or metadata reads (other formats: 4 × this), at once")
	fs.StringVar(&tok.tokens, "tokens", "", "a token dataset: the list-of-integers column whose rows are documents of tokens (Parquet list<int>, MDS integer ndarray); indexing reads that column once to count each document's tokens (docs/format.md §6.7)")
	fs.StringVar(&tok.text, "text", "", "a token dataset of text: the string column (Parquet string, MDS str) tokenized with --tokenizer; indexing tokenizes each document once to count its tokens (a document past the tokenizer's 8 MiB is refused naming its row, from its length, unread)")
	fs.StringVar(&tok.tokenizer, "tokenizer", "", "with --text: the tokenizer the text is tokenized with, a SentencePiece model (tokenizer.model), a Hugging Face tokenizer.json of byte-level BPE (Llama 3, Qwen, GPT-2) or a tiktoken encoding's rank file (cl100k_base.tiktoken, o200k_base.tiktoken, r50k_base, p50k_base, as tiktoken publishes them): a file, or s3://bucket/path/FILE; stored in the dataset's description, so every node uses the same one. Alone on image-text samples — tar shards of WebDataset pairs, or Parquet served in place with an image column and a text or conversation column: their facts for vision jobs (seq= with vision=), each sample's text tokens and image sizes, stored with the tokenizer at _brand/vision-facts (docs/format.md §6.12); a Parquet row's text past the tokenizer's 8 MiB is refused from its length, unread")
	fs.StringVar(&tok.vocabulary, "vocabulary", "", "with --tokens: names the tokens' vocabulary (a tokenizer's name), so that a mixture of datasets of other vocabularies is refused")
	fs.Var(&checksums, "checksums", "a dataset served in place: read every file once now and record the CRC32C of every range its chunks are read in (a video's: of every GOP), which every read of a chunk checks, so that bit rot or any edit is a 502 naming the file (a video: the GOP, whose clips alone fail), as a packed dataset's samples are checked; a touched or copied file still serves (docs/format.md §6.9). Default: on for video and LeRobot, whose damaged packets decode into wrong frames without an error; off for Parquet, MDS and Megatron. --checksums=false refuses them: a local file is then pinned by its size and modification time, an S3 object by its ETag, and bytes damaged at rest are not caught")
	fs.BoolVar(&appendNew, "append", false, "a dataset served in place: index only the files under --src (and --prefix) that its stored index (at --dst, or --src) does not hold yet, reading their metadata alone, and store a new index version that extends the old one: the old chunks first, every old sample under its ID, so that a running job keeps its order and may take the new samples from a step of its choosing (POST /jobs/{job}/append, docs/http-api.md). The files must have the dataset's schema; an indexed file changed or removed since is refused (index again without --append). The dataset's own --format, --members, token and --checksums settings are kept; with --tokenizer alone, the new version's image-text facts are written (every row read again)")
	fs.BoolVar(&sizes, "sizes", false, sizesUsage+"; with --append, the new version's are written whole where the dataset had none (an append to a dataset with sizes writes the new version's without it, its old samples' copied)")
	fs.BoolVar(&skipBad, "skip-bad-files", false, "a tree of videos: leave out each video that cannot be indexed (not an MP4/MOV, truncated, a damaged moov, an unsupported codec, past a limit) rather than refuse the dataset for it; each is printed and named with why in the manifest (in_place.skipped). Without it the first such file refuses the index, naming it")
	sf.Register(fs)
	if err := cli.ParseFlags(fs, env, args, "brand index --src URL [flags]"); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageError(env, "index", "unexpected argument %q", fs.Arg(0))
	case src == "":
		return errors.New("no --src given: name the store holding the shards (s3://bucket/prefix or a directory)")
	case parallel < 1:
		return usageError(env, "index", "--parallel must be at least 1")
	}
	st, err := s3backend.Open(ctx, src, sf.Config())
	if err != nil {
		return err
	}
	if err := tok.check(); err != nil {
		return usageError(env, "index", "%v", err)
	}
	if appendNew {
		if tok.set() && (tok != tokenFlags{tokenizer: tok.tokenizer}) || checksums.set || members != "" || fmtName != "" || name != "" || skipBad {
			return usageError(env, "index", "--append keeps the dataset's format, name, members, token fields and checksums: give only --src, --dst, --prefix, --chunk-size, --parallel, --sizes and --tokenizer (alone: the image-text facts of the new version)")
		}
		return appendInPlace(ctx, env, st, src, dst, prefix, tok.tokenizer, sizes, int64(chunk), parallel, sf)
	}
	if fmtName != "tar" && fmtName != "webdataset" && (fmtName != "" || !onlyTar(ctx, st, prefix)) {
		opt := format.Options{ChunkBytes: int64(chunk), Parallel: 4 * parallel, Tokens: tok.tokens, Text: tok.text, Vocabulary: tok.vocabulary, SkipBad: skipBad}
		return indexInPlace(ctx, env, st, src, dst, prefix, name, fmtName, members, tok.tokenizer, sizes, opt, checksums, sf)
	}
	if skipBad {
		return usageError(env, "index", "--skip-bad-files is for a tree of videos: a tar shard that cannot be read is refused, naming it")
	}
	if tok.set() && (tok != tokenFlags{tokenizer: tok.tokenizer}) {
		return usageError(env, "index", "--tokens, --text and --vocabulary are for datasets served in place (Parquet, MDS); tar shards are not token datasets (--tokenizer alone writes the facts of their image-text samples)")
	}
	if checksums.set {
		return usageError(env, "index", "--checksums is for datasets served in place (Parquet, MDS, Megatron, video): the index of tar shards holds every sample's CRC32C already")
	}
	if dst != "" {
		return usageError(env, "index", "--dst: tar shards are indexed beside themselves (their index names them by key)")
	}
	var model []byte // --tokenizer: read and checked before the shards are read
	if tok.tokenizer != "" {
		if model, err = readModel(ctx, env, tok.tokenizer, sf); err != nil {
			return err
		}
	}
	bar := newProgressBar(env, "index")
	res, err := dataset.IndexShards(ctx, st, dataset.IndexOptions{
		Prefix:   prefix,
		Name:     name,
		Parallel: parallel,
		Tool:     "brand " + version,
		Progress: bar.callback(),
	})
	bar.finish()
	if err != nil {
		return err
	}
	ix := res.Index
	fmt.Fprintf(env.Stdout, "indexed %s samples in %d shards (%s) at %s, index %s\n",
		humanize.Comma(int64(ix.NumSamples())), ix.NumChunks(), humanize.IBytes(uint64(ix.TotalBytes())), src, ix.ID())
	if sizes {
		f, err := dataset.WriteSizes(ctx, st, ix, transform.DefaultMaxPixels, parallel)
		if err != nil {
			return fmt.Errorf("indexed, but no image sizes written: %w", err)
		}
		printSizes(env, f, ix)
	}
	if model == nil {
		return nil
	}
	// Image-text samples: their facts, which a vision job lays its
	// epochs out from (docs/format.md, *Image-text facts*).
	f, err := dataset.WriteVisionFacts(ctx, st, ix, model, transform.DefaultMaxPixels, parallel)
	if err != nil {
		return err
	}
	printFacts(env, f)
	return nil
}

// formatNames lists the formats --format takes.
func formatNames() string {
	names := []string{"tar (webdataset)"}
	for _, f := range formats() {
		names = append(names, f.Name())
	}
	return strings.Join(names, ", ")
}

// onlyTar reports whether no format served in place recognises the
// objects under prefix: the tar indexer's case (which says what it found
// when that is no tar shards either).
func onlyTar(ctx context.Context, st s3backend.Store, prefix string) bool {
	objs, err := st.List(ctx, prefix)
	if err != nil {
		return true // the tar indexer lists again, and says why it failed
	}
	listed := make([]format.Object, 0, len(objs))
	for _, o := range objs {
		listed = append(listed, format.Object{Key: o.Key, Size: o.Size, ETag: o.ETag})
	}
	for _, f := range formats() {
		if f.Detect(listed) {
			return false
		}
	}
	return true
}

// indexInPlace is `brand index` of a dataset served in place.
func indexInPlace(ctx context.Context, env *cli.Env, st s3backend.Store, src, dst, prefix, name, format_, members, tokenizer string, sizes bool,
	opt format.Options, checksums optionalBool, sf cli.S3Flags) error {
	out := st
	data := ""
	if dst != "" {
		var err error
		if out, err = s3backend.Open(ctx, dst, sf.Config()); err != nil {
			return err
		}
		data = src
	}
	var model []byte // --tokenizer: with --text, the text's; alone, the image-text facts'
	if tokenizer != "" {
		b, err := readModel(ctx, env, tokenizer, sf)
		if err != nil {
			return err
		}
		model = b
		if opt.Text != "" {
			opt.Tokenizer = b
		}
	}
	if members != "" {
		opt.Members = map[string]string{}
		for _, kv := range strings.Split(members, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || v == "" {
				return usageError(env, "index", "--members: %q is not FIELD=EXT", kv)
			}
			opt.Members[k] = v
		}
	}
	start := time.Now()
	res, err := dataset.IndexInPlace(ctx, st, out, dataset.InPlaceOptions{Formats: formats(), Format: format_,
		Prefix: prefix, Name: name, Data: data, Options: opt, Tool: "brand " + version,
		Checksums: checksums.set && checksums.v, NoChecksums: checksums.set && !checksums.v, ImageText: model != nil && opt.Text == ""})
	if err != nil {
		return err
	}
	ix, where := res.Index, src
	if dst != "" {
		where = dst
	}
	fmt.Fprintf(env.Stdout, "indexed %s samples in %d chunks of %s (%s resident at most) in place at %s in %s, index %s at %s\n",
		humanize.Comma(int64(ix.NumSamples())), ix.NumChunks(), res.Manifest.InPlace.Format, humanize.IBytes(uint64(ix.TotalBytes())),
		src, time.Since(start).Round(time.Millisecond), ix.ID(), where)
	if sk := res.Manifest.InPlace.Skipped; len(sk) > 0 {
		fmt.Fprintf(env.Stdout, "skipped %d files, named with why in the manifest:\n", len(sk))
		for _, f := range sk {
			fmt.Fprintf(env.Stdout, "  %s: %s\n", f.Key, f.Reason)
		}
	}
	if ix.Checksummed() {
		var spans int
		for c := range ix.NumChunks() {
			spans += len(ix.Spans(c))
		}
		fmt.Fprintf(env.Stdout, "checksums: the CRC32C of %s ranges of its files, checked on every read\n", humanize.Comma(int64(spans)))
	}
	if t := res.Tokens; t != nil {
		var docs, tokens int64
		for c := range ix.NumChunks() {
			for _, n := range t.DocTokens(c) {
				docs, tokens = docs+1, tokens+int64(n)
			}
		}
		vocab := t.Vocabulary()
		if vocab == "" {
			vocab = "not named"
		}
		fmt.Fprintf(env.Stdout, "token dataset: %s documents, %s tokens of %s in field %q, vocabulary %s\n",
			humanize.Comma(docs), humanize.Comma(tokens), t.TokenType(), t.TokenField(), vocab)
	}
	if sizes {
		// Read through the format's decoder with the image fields alone,
		// stored beside the index (at --dst when given).
		f, err := dataset.WriteSizesInPlace(ctx, out, st, ix, res.Decoder, transform.DefaultMaxPixels, max(1, opt.Parallel/4))
		if err != nil {
			return fmt.Errorf("indexed, but no image sizes written: %w", err)
		}
		printSizes(env, f, ix)
	}
	if model == nil || opt.Text != "" {
		return nil
	}
	// Image-text samples (Parquet rows of an image and a text or
	// conversation column): their facts, read through the format's
	// decoder as a gateway reads the rows, stored beside the index.
	f, err := dataset.WriteVisionFactsInPlace(ctx, out, st, ix, res.Manifest.InPlace.Format, res.Decoder, model, transform.DefaultMaxPixels, max(1, opt.Parallel/4))
	if err != nil {
		return fmt.Errorf("indexed, but no image-text facts written: %w", err)
	}
	printFacts(env, f)
	return nil
}

// printFacts says what `brand index --tokenizer` wrote of image-text
// samples.
func printFacts(env *cli.Env, f *vision.FactsFile) {
	faults := 0
	for _, s := range f.Samples {
		if s.Refused() {
			faults++
		}
	}
	fmt.Fprintf(env.Stdout, "wrote the image-text facts of %s samples (%s at fault: a vision job fails or skips them by --on-bad-image) at %s\n",
		humanize.Comma(int64(len(f.Samples))), humanize.Comma(int64(faults)), stored.VisionFactsKey)
}

// maxNamedBad is how many unreadable images printSizes names.
const maxNamedBad = 20

// sizesUsage is --sizes of `brand index` and `brand pack`.
const sizesUsage = "read each sample's image size — its first .jpg, .jpeg or .png member's width and height from its header, EXIF orientation applied — and decode the image whole, and store them beside the index at " +
	"_brand/image-sizes, for jobs that batch images by shape (docs/format.md §6.13): tar shards read sample by sample, Parquet and MDS served in place read with their image columns alone; " +
	"a sample without a readable image (no header, or data that does not decode) is recorded with why, not refused, and named on stderr with its file. A video's clips have their size, frame rate and length in its index already"

// printSizes says what --sizes wrote: the samples, those with an image
// size, and those without (no image member, or an image that does not
// read: its header, or its data). Each unreadable image is named on
// stderr, its sample's key, file and why, the first maxNamedBad of them
// (in sample order): found here, not at the step of a job that reads it.
func printSizes(env *cli.Env, f *imagesize.File, ix *chunkindex.Index) {
	none := 0
	var unreadable []int
	for id, why := range f.Bad {
		if why == imagesize.NoImage {
			none++
		} else {
			unreadable = append(unreadable, id)
		}
	}
	slices.Sort(unreadable)
	for i, id := range unreadable {
		if i == maxNamedBad {
			fmt.Fprintf(env.Stderr, "brand index: warning: %s more unreadable images (each sample's reason is in %s)\n", humanize.Comma(int64(len(unreadable)-i)), stored.SizesKey)
			break
		}
		fmt.Fprintf(env.Stderr, "brand index: warning: sample %q of %s: its image does not read: %s\n", ix.SampleKey(id), ix.Chunk(ix.ChunkOf(id)).Key, f.Bad[id])
	}
	fmt.Fprintf(env.Stdout, "wrote the image sizes of %s samples (%s images, %s bad: %s without an image, %s unreadable) at %s\n",
		humanize.Comma(int64(len(f.Sizes))), humanize.Comma(int64(len(f.Sizes)-len(f.Bad))), humanize.Comma(int64(len(f.Bad))),
		humanize.Comma(int64(none)), humanize.Comma(int64(len(f.Bad)-none)), stored.SizesKey)
}

// appendInPlace is `brand index --append`: the files not indexed yet
// added to a dataset served in place as a version extending its index.
// Nothing new is said, not failed: a writer's commit may run it after
// every batch of files, new or not.
func appendInPlace(ctx context.Context, env *cli.Env, st s3backend.Store, src, dst, prefix, tokenizer string, sizes bool, chunk int64, parallel int, sf cli.S3Flags) error {
	out, where := st, src
	if dst != "" {
		var err error
		if out, err = s3backend.Open(ctx, dst, sf.Config()); err != nil {
			return err
		}
		where = dst
	}
	var model []byte // --tokenizer: read and checked before the new files are
	if tokenizer != "" {
		var err error
		if model, err = readModel(ctx, env, tokenizer, sf); err != nil {
			return err
		}
	}
	start := time.Now()
	res, err := dataset.AppendInPlace(ctx, st, out, dataset.AppendOptions{Formats: formats(), Prefix: prefix,
		Options: format.Options{ChunkBytes: chunk, Parallel: 4 * parallel}, Tool: "brand " + version})
	if errors.Is(err, dataset.ErrNothingNew) {
		fmt.Fprintf(env.Stdout, "nothing new: %v; no index stored\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	ix := res.Index
	parent := ix.Lineage().Ancestors()[0]
	first, _ := ix.ChunkRange(parent.Chunks)
	fmt.Fprintf(env.Stdout, "appended %s samples in %d chunks to %s in %s: index %s extends %s (%s samples in %d chunks in all) at %s\n",
		humanize.Comma(int64(ix.NumSamples()-first)), ix.NumChunks()-parent.Chunks, src, time.Since(start).Round(time.Millisecond),
		ix.ID(), parent.ID, humanize.Comma(int64(ix.NumSamples())), ix.NumChunks(), where)
	// Sizes name one index version: a dataset that had them for the
	// version appended to has the new one's, the old samples' copied.
	// With --sizes, a dataset that had none (or stale ones) has them
	// written whole.
	sz, err := dataset.AppendSizes(ctx, out, st, ix, res.Decoder, parallel)
	switch {
	case errors.Is(err, imagesize.ErrFile) && !sizes:
		fmt.Fprintf(env.Stderr, "brand index: warning: the image sizes at %s are not of the version appended to, so none are written for the new one (write them with --append --sizes, or brand index --sizes): %v\n", stored.SizesKey, err)
		err = nil
	case errors.Is(err, imagesize.ErrFile), err == nil && sz == nil && sizes:
		sz, err = dataset.WriteSizesInPlace(ctx, out, st, ix, res.Decoder, transform.DefaultMaxPixels, parallel)
	}
	if err != nil {
		return fmt.Errorf("appended, but no image sizes written: %w", err)
	}
	if sz != nil {
		printSizes(env, sz, ix)
	}
	if model == nil {
		return nil
	}
	// The facts name one index version: the new one's are written anew
	// (every row read again), beside it.
	f, err := dataset.WriteVisionFactsInPlace(ctx, out, st, ix, res.Manifest.InPlace.Format, res.Decoder, model, transform.DefaultMaxPixels, parallel)
	if err != nil {
		return fmt.Errorf("appended, but no image-text facts written: %w", err)
	}
	printFacts(env, f)
	return nil
}

// tokenFlags are `brand index`'s flags of a token dataset.
type tokenFlags struct{ tokens, text, tokenizer, vocabulary string }

func (t tokenFlags) set() bool { return t != tokenFlags{} }

func (t tokenFlags) check() error {
	switch {
	case t.tokens != "" && t.text != "":
		return errors.New("--tokens and --text: a dataset's tokens are a list column or a text, not both")
	case t.text != "" && t.tokenizer == "":
		return errors.New("--text and --tokenizer go together: the text column and the tokenizer it is tokenized with")
	case t.vocabulary != "" && t.tokens == "":
		return errors.New("--vocabulary names a --tokens column's vocabulary (a --text dataset's is its model's fingerprint)")
	}
	return nil
}

// readModel reads a tokenizer file (tokenizer.model, tokenizer.json, NAME.tiktoken), a
// file or an object of a store (s3://bucket/path/FILE), at most
// tokenize.MaxModelBytes of
// it (package tokenize says what a model may be), and checks it before
// any row is read (checkModel).
func readModel(ctx context.Context, env *cli.Env, path string, sf cli.S3Flags) ([]byte, error) {
	b, err := readModelFile(ctx, path, sf)
	if err != nil {
		return nil, err
	}
	if err := checkModel(env, path, b); err != nil {
		return nil, err
	}
	return b, nil
}

// checkModel loads a tokenizer before the dataset is read, so that a
// file that is none is refused at once, naming what is wrong, and
// refuses one that maps text to nothing (tokenize.Model.Silent: an empty
// vocabulary), which would index every document as 0 tokens without a
// word. One that drops only some scripts' characters (no token for them
// and no unk_token) is a tokenizer as its reference runs it, perhaps
// trained for one language: it is indexed, with a warning naming the
// texts it drops.
func checkModel(env *cli.Env, path string, b []byte) error {
	m, err := tokenize.Load(b)
	if err != nil {
		return fmt.Errorf("--tokenizer %s: %w", path, err)
	}
	silent := m.Silent()
	switch {
	case len(silent) == len(tokenize.Probes):
		return fmt.Errorf("--tokenizer %s: the tokenizer (a %s of %d tokens) maps text to nothing: %q, and every other text tried, encodes to no token, "+
			"so every document would be indexed as 0 tokens (a byte-level BPE tokenizer.json needs its vocabulary, the byte alphabet in model.vocab, or an unk_token)",
			path, m.File(), m.VocabSize(), silent[0])
	case len(silent) > 0:
		fmt.Fprintf(env.Stderr, "brand index: warning: --tokenizer %s encodes %q to no token (its vocabulary has no token for those characters and no unk_token): "+
			"such characters are dropped from every document, as its reference drops them\n", path, silent)
	}
	return nil
}

// readModelFile is readModel's read of the file, unchecked.
func readModelFile(ctx context.Context, path string, sf cli.S3Flags) ([]byte, error) {
	if strings.HasPrefix(path, "s3://") {
		i := strings.LastIndexByte(path, '/')
		if i < len("s3://") || i == len(path)-1 {
			return nil, fmt.Errorf("--tokenizer %s: name the model's object (s3://bucket/path/tokenizer.model)", path)
		}
		st, err := s3backend.Open(ctx, path[:i], sf.Config())
		if err != nil {
			return nil, fmt.Errorf("--tokenizer: %w", err)
		}
		key := path[i+1:]
		info, err := st.Stat(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("--tokenizer %s: %w", path, err)
		}
		if info.Size > tokenize.MaxModelBytes {
			return nil, fmt.Errorf("--tokenizer: %s is larger than a tokenizer file may be (%d bytes)", path, tokenize.MaxModelBytes)
		}
		b := make([]byte, info.Size)
		if err := st.ReadRange(ctx, key, info.ETag, 0, b); err != nil {
			return nil, fmt.Errorf("--tokenizer %s: %w", path, err)
		}
		return b, nil
	}
	f, err := os.Open(strings.TrimPrefix(path, "file://"))
	if err != nil {
		return nil, fmt.Errorf("--tokenizer: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, tokenize.MaxModelBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--tokenizer: %w", err)
	}
	if len(b) > tokenize.MaxModelBytes {
		return nil, fmt.Errorf("--tokenizer: %s is larger than a tokenizer file may be (%d bytes)", path, tokenize.MaxModelBytes)
	}
	return b, nil
}
