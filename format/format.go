package format

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/brandgw/brand/internal/errkind"
)

// ErrInvalid marks a source that is not a valid dataset of the format, or
// metadata that lies (offsets past an object, overlapping ranges, counts
// that disagree): refused at index time, with the object named.
var ErrInvalid = errkind.New(errkind.Internal, "invalid dataset")

// ErrDamaged marks a chunk whose bytes do not decode (a bad page checksum,
// a codec error, truncated data, values that do not fit the resident
// bound): the chunk is damaged, as a tar chunk failing its CRC32C is.
var ErrDamaged = errkind.New(errkind.Internal, "damaged chunk")

// ErrUnsupported marks a valid source using a feature Brand does not read
// (an encoding, a codec, a column type), named in the message.
var ErrUnsupported = errkind.New(errkind.Internal, "unsupported")

// Object is one object of a source, as a listing gives it.
type Object struct {
	Key  string // relative to the source's root
	Size int64
	ETag string
}

// Store is what indexing reads through: a range of an object, pinned to
// its version (an object changed since the listing is an error).
type Store interface {
	ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error
}

// Format is one kind of dataset served in place.
type Format interface {
	// Name is the format's name, as `brand index --format` takes it
	// ("parquet", "mds", "megatron").
	Name() string
	// Detect reports whether a source whose listing is objs holds a
	// dataset of this format (by names and sizes alone).
	Detect(objs []Object) bool
	// Index reads the source's own metadata, never its data, and
	// describes the dataset. objs is the source's listing, sorted by key.
	Index(ctx context.Context, st Store, objs []Object, opt Options) (*Layout, error)
	// Open returns the decoder of a dataset this format indexed, from
	// the Meta its Index returned.
	Open(meta []byte) (Decoder, error)
}

// Appender is implemented by a format whose description of a dataset
// can be extended by new objects without reading the indexed ones again
// (`brand index --append`, dataset.AppendInPlace).
type Appender interface {
	// Append reads the metadata of objs — objects of the source that
	// the dataset meta describes does not hold, sorted by key — and
	// returns the layout of theirs alone: their chunks and keys, each
	// chunk cut from its own object as Index would cut it, and as Meta
	// the description of the dataset's chunks followed by theirs. Objects
	// the format would not index are skipped; none left is a layout of no
	// chunks with meta unchanged. An object whose schema is not the
	// dataset's, or a dataset whose description cannot be extended, is
	// ErrInvalid or ErrUnsupported naming it.
	Append(ctx context.Context, st Store, meta []byte, objs []Object, opt Options) (*Layout, error)
}

// Supersedes is implemented by a format whose datasets are built of
// another format's objects — a LeRobot dataset's tables are Parquet
// files beside its videos — so that a listing both recognise is the
// composite's: it names the formats it supersedes (by Name), and
// detection picks it over them.
type Supersedes interface {
	Supersedes() []string
}

// Skipper is implemented by a format that can leave out an object it
// cannot index rather than refuse the whole dataset for it
// (Options.SkipBad), naming it and why in Layout.Skipped.
// dataset.IndexInPlace refuses SkipBad with a format that does not
// implement it, so that no format ignores the option: a Parquet file
// that does not decode is a dataset to repair, not a row to drop.
type Skipper interface {
	// SkipsBad is a marker: its presence is the promise.
	SkipsBad()
}

// Options are what a user may say about indexing a source.
type Options struct {
	// ChunkBytes is the target size of a chunk, for formats that cut
	// chunks themselves (Megatron's spans); 0 means DefaultChunkBytes.
	ChunkBytes int64
	// Members overrides the member extension a field's values get
	// (field name → extension, e.g. "label" → "cls").
	Members map[string]string
	// Parallel is how many metadata reads run at once; 0 means 16.
	Parallel int
	// Limits bounds what hostile metadata can cost; zero fields take
	// DefaultLimits'.
	Limits Limits
	// Tokens names a field whose values are documents of tokens (a list
	// of integers: a Parquet list<int*> column, an MDS 1-D integer
	// ndarray column). Indexing then reads that field once — the one
	// time it reads data — and records every document's token count in
	// the description, so that the decoder implements Tokens. Formats
	// that cannot refuse it with ErrUnsupported.
	Tokens string
	// Text names a string field tokenized with Tokenizer: indexing
	// tokenizes every document once and records its token count (never
	// the tokens); decoding, when a job reads the field TextTokensField,
	// tokenizes again and writes the tokens' .npy. Text and Tokens are
	// exclusive.
	Text string
	// Tokenizer is a SentencePiece model's bytes (package tokenize), with
	// Text. The description holds them, so every node decodes with the
	// same model, and the dataset's Vocabulary is its fingerprint.
	Tokenizer []byte
	// Vocabulary names the tokens' vocabulary of a Tokens dataset (a
	// tokenizer's name or fingerprint), "" when unknown; a Text dataset's
	// is its model's fingerprint.
	Vocabulary string
	// SkipBad has a Skipper leave out each object it cannot index (not
	// a file of its kind, truncated, damaged metadata, an unsupported
	// codec, past a limit), named with why in Layout.Skipped, instead of
	// refusing the dataset for it (`brand index --skip-bad-files`).
	// Errors of the store (unavailable, changed, canceled) still refuse.
	SkipBad bool
}

// TextTokensField is the field a Text dataset's tokens are read by: the
// text field's documents tokenized, one int32 .npy a document.
const TextTokensField = "tokens"

// DefaultChunkBytes is the chunk size formats that cut their own chunks
// aim for: the size `brand pack` writes.
const DefaultChunkBytes = 64 << 20

// Limits bounds the metadata a format accepts. Everything beyond a limit
// is refused at index time with a message naming the object and the limit.
type Limits struct {
	// MetaBytes bounds one object's metadata read whole (a Parquet
	// footer, an MDS index.json, a Megatron .idx's tables).
	MetaBytes int64
	// ChunkBytes bounds a chunk's resident bound: a row group or a shard
	// larger than this cannot be a chunk (it could not be cached whole,
	// and a sample's length in the resident table is 32 bits). At most
	// MaxChunkBytes.
	ChunkBytes int64
	// Fields bounds the fields (columns) a sample has.
	Fields int
	// Depth bounds the nesting of a field's type.
	Depth int
	// ChunkSamples bounds the samples in one chunk.
	ChunkSamples int
	// DocTokens bounds one document's tokens in a token dataset
	// (Options.Tokens, Options.Text): a longer document is refused at
	// index time, when its count passes the bound, before anything is
	// allocated for its tokens. At most MaxDocTokens.
	DocTokens int64
}

// MaxDocTokens is the most Limits.DocTokens may be: a document's token
// count is 32-bit (Tokens.DocTokens).
const MaxDocTokens = 1<<32 - 1

// DefaultLimits are the limits of an unset Limits field.
var DefaultLimits = Limits{
	MetaBytes:    256 << 20,
	ChunkBytes:   2 << 30,
	Fields:       1024,
	Depth:        64,
	ChunkSamples: 1 << 24,
	DocTokens:    1 << 28,
}

// MaxChunkBytes is the most Limits.ChunkBytes may be: the resident
// table's sample lengths are 32-bit.
const MaxChunkBytes = 4<<30 - 1

// WithDefaults returns l with every unset field set to DefaultLimits',
// and ChunkBytes at most MaxChunkBytes.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	if l.MetaBytes > 0 {
		d.MetaBytes = l.MetaBytes
	}
	if l.ChunkBytes > 0 {
		d.ChunkBytes = min(l.ChunkBytes, MaxChunkBytes)
	}
	if l.Fields > 0 {
		d.Fields = l.Fields
	}
	if l.Depth > 0 {
		d.Depth = l.Depth
	}
	if l.ChunkSamples > 0 {
		d.ChunkSamples = l.ChunkSamples
	}
	if l.DocTokens > 0 {
		d.DocTokens = min(l.DocTokens, MaxDocTokens)
	}
	return d
}

// Layout is what indexing found: the chunks, the samples' keys, the
// fields, and the format's own description of them for Open.
type Layout struct {
	// Chunks in serving order; their samples are numbered in that order.
	Chunks []Chunk
	// Keys holds every sample's key, chunk by chunk: unique across the
	// dataset, stable across re-indexing (named by object and position,
	// e.g. "data/train-00000-of-00042/000123").
	Keys []string
	// Meta is the format's description of the chunks, handed back to
	// Open. It is stored beside Brand's index, so it must be
	// deterministic: the same source indexes to the same bytes.
	Meta []byte
	// Skipped are the objects of the listing the format took for its
	// kind and left out, in key order, each with why: always those of
	// its kind it does not read (a tree of videos' .webm files beside its
	// .mp4s), and with Options.SkipBad those it could not index. The
	// manifest names them (chunkindex.ManifestInPlace.Skipped).
	Skipped []Skipped
}

// Skipped is an object a format left out of its layout, and why.
type Skipped struct {
	Key    string
	Reason string
}

// Chunk is one chunk of a layout.
type Chunk struct {
	// Object is the key of the object the chunk's bytes are in, and
	// ETag and Size that object's version and size.
	Object string
	ETag   string
	Size   int64
	// Samples is the number of samples in the chunk.
	Samples int
	// Name, if set, tells the chunk from the object's other chunks in
	// its key ("object#Name", dataset.BuildInPlace); else its ordinal
	// among them does. A format that may cut an object into chunks
	// differently from one index to the next names them by what they
	// hold, so that one key never names two chunks' bytes.
	Name string
}

// Field is one kind of member a dataset's samples have: what a job
// selects (columns=) and the member it becomes.
type Field struct {
	// Name is what a job selects the field by: a Parquet column, an MDS
	// column, "tokens" for Megatron.
	Name string
	// Ext is the member's extension in a sample ("jpg", "cls",
	// "label.cls", "npy"); empty when each value's own bytes decide it
	// (an image column: "jpg" or "png" by magic bytes or path).
	Ext string
	// Type says what the field holds, in the format's words, for
	// listings and errors ("binary (image)", "int64", "list<int32>").
	Type string
}

// Range is a byte range of an object.
type Range struct{ Off, Len int64 }

// End is the offset just past r.
func (r Range) End() int64 { return r.Off + r.Len }

// Selection is the fields a job reads, as indexes into Decoder.Fields in
// ascending order; nil reads every field.
type Selection []int

// All reports whether s selects every field.
func (s Selection) All() bool { return s == nil }

// Has reports whether s selects field f.
func (s Selection) Has(f int) bool {
	if s == nil {
		return true
	}
	_, ok := slices.BinarySearch(s, f)
	return ok
}

// Select returns the selection of the named fields of fs, in ascending
// field order, or an error naming a field fs does not have. No names, or
// every field named, is nil: the whole dataset.
func Select(fs []Field, names []string) (Selection, error) {
	if len(names) == 0 {
		return nil, nil
	}
	sel := make(Selection, 0, len(names))
	for _, n := range names {
		i := slices.IndexFunc(fs, func(f Field) bool { return f.Name == n })
		if i < 0 {
			have := make([]string, len(fs))
			for j, f := range fs {
				have[j] = f.Name
			}
			return nil, fmt.Errorf("%w: no field %q; the dataset has %s", ErrInvalid, n, strings.Join(have, ", "))
		}
		sel = append(sel, i)
	}
	slices.Sort(sel)
	sel = slices.Compact(sel)
	if len(sel) == len(fs) {
		return nil, nil
	}
	return sel, nil
}

// Names returns the selected fields' names, comma-separated: the
// selection as cache keys and ETags name it ("" for every field).
func (s Selection) Names(fs []Field) string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	for i, f := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(fs[f].Name)
	}
	return b.String()
}

// Decoder decodes the chunks of one indexed dataset.
type Decoder interface {
	// Fields are the fields every sample may have, in a fixed order.
	Fields() []Field
	// Extent returns what reading chunk c with the fields sel costs: the
	// byte ranges of its object to read (ascending, not overlapping,
	// adjacent ranges merged) and the chunk's resident bound.
	Extent(c int, sel Selection) (ranges []Range, resident int64)
	// Decode writes chunk c's samples, with the fields sel, in the
	// resident form into dst (len(dst) is Extent's resident bound). src
	// holds the bytes of Extent's ranges back to back. An error wraps
	// ErrDamaged when the bytes are at fault.
	Decode(c int, sel Selection, src, dst []byte, w WriterOptions) error
}

// Streamer is implemented by a Decoder that can decode a chunk as its
// bytes arrive from the store, rather than from one buffer they were all
// read into: what it reads straight into the resident form is read once
// by the processor, while it is in its cache (format/parquet's images).
type Streamer interface {
	// DecodeStream is Decode reading Extent's ranges itself, each once
	// with open, into src (which it may leave partly unwritten) and dst.
	// An error from a reader is returned wrapped, and is not ErrDamaged.
	// A chunk it has nothing to stream of, or cannot decode from what it
	// streamed, ends in an error wrapping ErrNotStreamed: the caller reads
	// the ranges and calls Decode, as for a decoder that does not stream.
	DecodeStream(c int, sel Selection, open func(Range) (io.ReadCloser, error), src, dst []byte, w WriterOptions) error
}

// ErrNotStreamed is a chunk a Streamer did not decode as it arrived
// (Streamer.DecodeStream).
var ErrNotStreamed = errkind.New(errkind.Internal, "format: not streamed")

// Working is implemented by a Decoder whose Decode takes memory of its
// own beyond src and dst — a shard decompressed whole, a column reader's
// copy of its column chunks and their pages — so that a gateway reserves
// it, from the metadata alone, before it reads and decodes the chunk.
type Working interface {
	// Working bounds what Decode of chunk c with the fields sel
	// allocates, in bytes.
	Working(c int, sel Selection) int64
}

// Buffers lend a decode large scratch buffers (the node's pools:
// memory.Manager's Get and Put) that it gives back before Decode
// returns.
type Buffers interface {
	Get(n int64) []byte
	Put(b []byte)
}

// WriterOptions are what every decode of a dataset writes alike.
type WriterOptions struct {
	// ModTime is every member's modification time: the index's.
	ModTime int64 // Unix seconds
	// MayGrow is set by a decoder whose bound for the chunk is not sure
	// (metadata that cannot bound values a dictionary repeats, say): a
	// chunk needing more than its bound then ends in a *GrowError naming
	// what it needs, which the caller decodes it into, rather than being
	// damaged.
	MayGrow bool
	// Buffers, if set, lend Decode its large scratch buffers; otherwise
	// it allocates them.
	Buffers Buffers
	// Damaged, given only to a Confiner for a chunk it confines, are the
	// ranges of the chunk's object that failed the index's checksums on
	// every read: the samples they touch are written damaged
	// (WriteDamaged), the rest as usual (damage.go).
	Damaged []Damage
}

// Concat returns the total length of rs.
func Concat(rs []Range) int64 {
	var n int64
	for _, r := range rs {
		n += r.Len
	}
	return n
}

// Merge sorts rs and merges ranges that overlap or touch, in place.
func Merge(rs []Range) []Range {
	slices.SortFunc(rs, func(a, b Range) int {
		switch {
		case a.Off < b.Off:
			return -1
		case a.Off > b.Off:
			return 1
		}
		return 0
	})
	out := rs[:0]
	for _, r := range rs {
		if r.Len <= 0 {
			continue
		}
		if n := len(out); n > 0 && r.Off <= out[n-1].End() {
			if r.End() > out[n-1].End() {
				out[n-1].Len = r.End() - out[n-1].Off
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// Tokens is implemented by the Decoder of a token dataset: one whose
// samples are documents of tokens, each a 1-D .npy member of one field —
// a Megatron document, a Parquet or MDS row's list of integers, a text
// tokenized with a SentencePiece model named at index time. A job that
// packs documents into sequences (seq=) needs every document's token
// count before any chunk is read: the index has them.
type Tokens interface {
	// DocTokens is chunk c's documents' token counts, in sample order.
	// The slice is shared: read it, never write it.
	DocTokens(c int) []uint32
	// TokenType is the NumPy dtype the documents' .npy members hold
	// ("uint16", "int32", ...).
	TokenType() string
	// TokenField is the field whose member holds the tokens.
	TokenField() string
	// Vocabulary names the tokens' vocabulary where the dataset says it
	// (a tokenizer's fingerprint), "" where it does not: a mixture of
	// datasets whose vocabularies are named and differ is refused.
	Vocabulary() string
}

// TokenSpecials is implemented by a token dataset's decoder that can say
// its tokenizer's special IDs: a text dataset's SentencePiece model
// (Options.Text) knows its EOS. A job that puts an EOS between documents
// may default to it.
type TokenSpecials interface {
	// EOS is the end-of-sequence ID, ok false when the dataset does not
	// know one (a list column's, a model without EOS).
	EOS() (id int32, ok bool)
}

// ErrNotImageText marks a dataset served in place whose samples are not
// image-text samples (package vision: an image member, .jpg or .png,
// and a text member, .txt, or a conversation, .json): a format whose
// decoder does not implement ImageText, or a dataset of one that has no
// image field or no text field, named with the fields it has. A vision
// job over it is refused (400), and `brand index --tokenizer` writes no
// facts of it.
var ErrNotImageText = errkind.New(errkind.Invalid, "not image-text samples")

// ImageText is implemented by the Decoder of a format whose samples may
// be image-text samples as package vision reads a WebDataset pair: a
// Parquet row of an image bytes column and a string or conversation
// column. A format that does not implement it (MDS, Megatron's token
// spans, a video's GOPs, LeRobot's frames) is not read as one.
type ImageText interface {
	// ImageText refuses, with ErrNotImageText naming the dataset's
	// fields and how to choose them, a dataset whose fields do not make
	// an image-text sample: no image field, or none a vision job reads
	// as its image (two image fields, each qualified by its name), or no
	// text or conversation field.
	ImageText() error
	// UnreadImage reports whether a member of extension ext is a value
	// of the image field that package vision does not read as an image:
	// an image of another format than JPEG or PNG (webp, gif, …), or
	// bytes of no image's ("bin": empty, or damaged). A sample holding
	// one has a bad image, not none.
	UnreadImage(ext string) bool
}

// TextBound is implemented by the Decoder of image-text samples
// (ImageText) whose text values' lengths are stated before the values:
// a Parquet column chunk's size statistics, its pages' headers, each
// PLAIN value's length prefix. Whoever reads a sample's text only up to
// a bound — a tokenizer's (tokenize.MaxTextBytes), when `brand index
// --tokenizer` reads image-text facts — decodes a chunk without the
// texts past it, rather than read them to refuse them.
type TextBound interface {
	// DecodeTexts decodes chunk c with every field (src holds Extent's
	// ranges of every field) into a buffer of its own, sized by the
	// chunk's bound less what it leaves out: every value of a text field
	// (a string member's, a conversation's) of more than most bytes is
	// left unread, written empty, and its sample named in long. A value
	// whose length it cannot read first is read as Decode reads it.
	DecodeTexts(c int, src []byte, most int64, w WriterOptions) (dst []byte, long []LongText, err error)
	// LongTexts reports whether chunk c read with the fields sel may
	// hold a text value of more than most bytes, as its metadata says
	// before anything of it is read, and if so what DecodeUnread of it
	// allocates (as Working bounds Decode's).
	LongTexts(c int, sel Selection, most int64) (working int64, may bool)
	// DecodeUnread is Decode of chunk c with the fields sel (src holds
	// Extent's ranges), but for the samples holding a value of a text
	// field of more than most bytes: each is written unread (WriteUnread)
	// naming the field, its bytes and most, the value never read, where
	// DecodeTexts leaves it unread. A value whose length it cannot read
	// first is read as Decode reads it. dst may be shorter than the
	// bound, which counts the values left unread (the size a decode of
	// the chunk was found to need, Table.Need): a decode needing more
	// than dst ends in a *GrowError naming what it needs.
	DecodeUnread(c int, sel Selection, src, dst []byte, most int64, w WriterOptions) error
}

// LongText is a text value TextBound left unread: its sample (its index
// in the chunk), its field and its bytes, the longest of the sample's in
// that field.
type LongText struct {
	Sample int
	Field  string
	Bytes  int64
}

// CheckImageText refuses dec, a decoder of format name, unless its
// samples are image-text samples (ImageText): the one check the
// indexer, before it writes a dataset's image-text facts, and the
// gateway, before it serves a vision job, both make.
func CheckImageText(name string, dec Decoder) error {
	it, ok := dec.(ImageText)
	if !ok {
		return fmt.Errorf("%w: a dataset of format %s is not read as image-text samples; a vision job reads tar chunks of WebDataset pairs, or Parquet rows of an image column and a text or conversation column", ErrNotImageText, name)
	}
	return it.ImageText()
}
