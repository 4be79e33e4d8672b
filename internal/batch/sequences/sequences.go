// Package sequences is the pack stage: it writes a token job's batch — its
// sequences, laid out by package seqpack from the documents' token counts —
// from the documents the read stage read, as tar members a trainer loads
// as they are. It stands beside the transform stage (internal/batch/tensorize)
// between read and respond, on the same worker pool and memory budget.
//
// # What a sequence is on the wire
//
// Each sequence is one sample of the tar, keyed "seq/EPOCH/POSITION" (its
// position in the epoch's sequences), with two members:
//
//   - KEY.input_ids.npy: int32 [seq], the pieces' tokens in order (a
//     concat piece that ends its document ends with the job's EOS), then
//     the pad ID over the rest;
//   - KEY.position_ids.npy: int32 [seq], 0, 1, … restarting at 0 at the
//     start of each piece, then 0 … p-1 over the pad, which is one last
//     segment: cu_seqlens are the positions where position_ids is 0, and
//     the end.
//
// Every member's length depends on seq alone (SequenceBytes), so a
// batch's body is known before any document is read: the stage takes
// that much of the copy budget at once and each worker writes its
// sequences into their place.
//
// # Tokens
//
// A document arrives as its sample's bytes: tar members, of which its one
// .npy holds the tokens in the file's dtype (uint8 to int64). Tokens are
// converted to int32; an ID outside [0, 2^31) is refused (ErrTokenID),
// naming the document, and the batch fails: nothing is served wrong.
//
// # One batch writer
//
// Every kind of batch the stage writes — a token job's sequences (Pack),
// a vision job's (PackVision, vision.Writer's members) — is written by
// one batch writer (batch.go): a kind says each sequence's bytes and
// writes its members; the writer holds the batch to the stage's bound,
// takes its memory, runs the workers and writes the tar through
// internal/codec/ustar, each sequence into its place. A new kind of
// batch brings its per-sequence encoding, nothing more.
//
// # Concurrency
//
// A Stage is safe for concurrent use; its work runs on the Workers it is
// given, whose pool bounds the CPU of every stage that shares it.
package sequences

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/internal/codec/ustar"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/seqpack"
)

var (
	// ErrDocument marks a document whose bytes are not what its index
	// promised: no .npy member, another dtype, fewer tokens than its
	// pieces name.
	ErrDocument = errkind.New(errkind.Upstream, "sequences: document not as indexed")
	// ErrTokenID marks a token ID that int32 cannot hold, or a negative one.
	ErrTokenID = errkind.New(errkind.Unprocessable, "sequences: token ID outside int32")
	// ErrTooLarge marks a batch whose sequences make more bytes than the
	// stage's bound.
	ErrTooLarge = errkind.New(errkind.Invalid, "sequences: batch too large")
)

// Workers runs a call's work and hands out its memory (tensorize.Stage): Run
// calls f(i) for i in [0, n) on the pool's workers; Buffer takes n bytes
// of the copy budget, waiting for it unless noWait; Decode takes n bytes
// of the node's decodes for an image about to be decoded (a vision
// sequence's), by the rule the transform stage's own images follow:
// waiting within the budget's bound unless noWait, and refusing a decode
// larger than all of it (transform.ErrTooLarge).
type Workers interface {
	Run(ctx context.Context, n int, f func(i int)) error
	Buffer(ctx context.Context, n int64, noWait bool) ([]byte, func(), error)
	Decode(ctx context.Context, n int64, noWait bool) (release func(), err error)
}

// Config configures a Stage.
type Config struct {
	Workers Workers
	// MaxBytes bounds one call's output (query.Limits.MaxBatchBytes).
	MaxBytes int64
	// Registry, if not nil, gets the stage's counters
	// (brand_token_*_total).
	Registry prometheus.Registerer
}

// Stage packs token batches. Safe for concurrent use.
type Stage struct {
	workers  Workers
	maxBytes int64
	figures  figures
	// The members' headers of each kind's sequences.
	tokenHeader, visionHeader *ustar.Template
}

// New returns a stage.
func New(c Config) *Stage {
	s := &Stage{workers: c.Workers, maxBytes: c.MaxBytes, tokenHeader: memberHeader(), visionHeader: epochHeader()}
	if c.Registry != nil {
		for _, m := range []struct {
			name, help string
			v          *atomic.Int64
		}{
			{"brand_token_sequences_total", "Sequences of token jobs (seq=) packed into served batches.", &s.figures.sequences},
			{"brand_token_tokens_total", "Tokens of those sequences, pad included (sequences × seq).", &s.figures.tokens},
			{"brand_token_nonpad_total", "Tokens of those sequences that are not pad: fill is this over brand_token_tokens_total.", &s.figures.nonPad},
			{"brand_token_split_pieces_total", "Pieces of those sequences that are part of a document cut across sequences.", &s.figures.split},
		} {
			c.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help},
				func() float64 { return float64(m.v.Load()) }))
		}
	}
	return s
}

// Spec is what a call writes beside its sequences: their length, the
// pad ID, concat's EOS ID, and the dtype the documents are expected in
// ("uint16", ...; "" takes each document's own).
type Spec struct {
	Seq      int
	Pad, EOS int32
	DType    string
}

// Request is one batch's work: its sequences, each sequence's key and,
// per piece, the position in Docs of the document it is cut from; Docs
// are the documents as read (their samples' bytes).
type Request struct {
	Spec  Spec
	Keys  []string
	Seqs  []seqpack.Sequence
	At    [][]int
	Docs  [][]byte
	Names []string // per document: its key, for errors
	// Split is how many of the pieces are part of a document (the
	// layout's count), for the figures.
	Split  int
	NoWait bool
}

// Output is a call's sequences as tar members, in order, in one buffer
// that counts against the copy budget until Release.
type Output struct {
	Parts net.Buffers // one a sequence: its two members
	Bytes int64
	// Tokens is the sequences' tokens, NonPad those that are not pad.
	Tokens, NonPad int64
	// Skipped are the samples a vision batch's sequences were written
	// without (VisionRequest.Skip), in sequence order.
	Skipped []VisionSkip
	release func()
}

// Release gives the output's buffer back. Idempotent.
func (o *Output) Release() {
	if o.release != nil {
		o.release()
		o.release = nil
	}
}

// block is a tar block.
const block = ustar.BlockSize

// npyLen is the .npy header of an int32 [seq] array: 128 bytes for any
// seq up to seqpack.MaxSeq (NumPy aligns the data to 64).
func npyLen(seq int) int { return npy.HeaderLen("<i4", []int64{int64(seq)}) }

// MemberBytes is one member of a sequence of seq tokens in the tar: its
// header block, the .npy and the padding to a block.
func MemberBytes(seq int) int64 {
	n := int64(npyLen(seq) + 4*seq)
	return block + (n+block-1)/block*block
}

// SequenceBytes is one sequence's bytes in the tar: two members.
func SequenceBytes(seq int) int64 { return 2 * MemberBytes(seq) }

// Key is the tar key of the sequence at position pos of epoch epoch.
func Key(epoch uint64, pos int) string {
	return "seq/" + strconv.FormatUint(epoch, 10) + "/" + fmt.Sprintf("%010d", pos)
}

// doc is a document's tokens: the .npy's data and its element.
type doc struct {
	data  []byte
	size  int  // bytes a token
	sign  bool // a signed dtype
	count int
}

// Pack writes req's sequences. The output's size is known before any
// document is parsed; the documents are parsed, then each sequence
// written into its place on the workers. On error nothing is held.
func (s *Stage) Pack(ctx context.Context, req Request) (*Output, error) {
	seq := req.Spec.Seq
	if seq < 1 || seq > seqpack.MaxSeq {
		return nil, fmt.Errorf("%w: seq %d", seqpack.ErrInvalid, seq)
	}
	k := &tokens{req: &req}
	b, err := s.sized(req.Keys[:len(req.Seqs)], s.tokenHeader, k, func(total int64) error {
		return fmt.Errorf("%w: %d sequences of %d tokens make %d bytes, over the server's --max-batch-bytes (%d)",
			ErrTooLarge, len(req.Seqs), seq, total, s.maxBytes)
	})
	if err != nil {
		return nil, err
	}
	k.docs = make([]doc, len(req.Docs))
	for i, sample := range req.Docs {
		if sample == nil {
			continue // no sequence of the request reads it
		}
		d, err := parseDoc(sample, req.Spec.DType)
		if err != nil {
			return nil, fmt.Errorf("%w (document %s)", err, name(req.Names, i))
		}
		k.docs[i] = d
	}
	for i, q := range req.Seqs {
		n := q.Pad
		for j, pc := range q.Pieces {
			n += pc.Len
			d := k.docs[req.At[i][j]]
			if d.data == nil || pc.Offset+pc.Len-eos(pc) > d.count {
				return nil, fmt.Errorf("%w: a piece of tokens [%d, %d) of a document of %d (document %s)",
					ErrDocument, pc.Offset, pc.Offset+pc.Len-eos(pc), d.count, name(req.Names, req.At[i][j]))
			}
		}
		if n != seq {
			return nil, fmt.Errorf("%w: a sequence of %d tokens, not %d", seqpack.ErrInvalid, n, seq)
		}
	}
	out, err := s.write(ctx, b, req.NoWait)
	if err != nil {
		return nil, err
	}
	for _, q := range req.Seqs {
		out.Tokens += int64(seq)
		out.NonPad += int64(seq - q.Pad)
	}
	s.figures.add(out, len(req.Seqs), req.Split)
	return out, nil
}

// tokens is a token batch as the batch writer's kind: each sequence
// two members of MemberBytes, written from the documents parsed.
type tokens struct {
	req  *Request
	docs []doc
}

func (k *tokens) size(int) int64 { return SequenceBytes(k.req.Spec.Seq) }

func (k *tokens) write(i int, w *ustar.Writer) error {
	return writeSequence(w, k.req.Keys[i], k.req.Seqs[i], k.req.At[i], k.docs, k.req.Spec)
}

func eos(pc seqpack.Piece) int {
	if pc.EOS {
		return 1
	}
	return 0
}

func name(names []string, k int) string {
	if k < len(names) {
		return names[k]
	}
	return strconv.Itoa(k)
}

// writeSequence writes one sequence's two members through w.
func writeSequence(w *ustar.Writer, key string, q seqpack.Sequence, at []int, docs []doc, spec Spec) error {
	seq := spec.Seq
	data, err := npyMember(w, seq, key, ".input_ids.npy")
	if err != nil {
		return err
	}
	p := 0
	for j, pc := range q.Pieces {
		d := docs[at[j]]
		n := pc.Len - eos(pc)
		if bad := d.convert(data[4*p:4*(p+n)], pc.Offset, n); bad >= 0 {
			return fmt.Errorf("%w: token %d of a document is %s", ErrTokenID, pc.Offset+bad, d.text(pc.Offset+bad))
		}
		p += n
		if pc.EOS {
			binary.LittleEndian.PutUint32(data[4*p:], uint32(spec.EOS))
			p++
		}
	}
	for ; p < seq; p++ {
		binary.LittleEndian.PutUint32(data[4*p:], uint32(spec.Pad))
	}
	if data, err = npyMember(w, seq, key, ".position_ids.npy"); err != nil {
		return err
	}
	p = 0
	for _, pc := range q.Pieces {
		for i := range pc.Len {
			binary.LittleEndian.PutUint32(data[4*p:], uint32(i))
			p++
		}
	}
	for i := range q.Pad {
		binary.LittleEndian.PutUint32(data[4*p:], uint32(i))
		p++
	}
	return nil
}

// npyMember writes through w a member named name's parts that holds an
// int32 [seq] .npy — its header block, the .npy's header, the padding
// (MemberBytes in all) — and returns the room for its 4·seq bytes of
// data.
func npyMember(w *ustar.Writer, seq int, name ...string) ([]byte, error) {
	h := npyLen(seq)
	room, err := w.Member(h+4*seq, name...)
	if err != nil {
		return nil, err
	}
	// In place: room has the room (seq is at most seqpack.MaxSeq, far
	// from a header too long).
	_, _ = npy.AppendHeader(room[:0], "<i4", []int64{int64(seq)})
	return room[h:], nil
}

// member is npyMember into out alone, MemberBytes long: one member, the
// unit a sequence's bytes are counted in.
func member(out []byte, header *ustar.Template, seq int, name ...string) []byte {
	data, _ := npyMember(ustar.NewWriter(out, header), seq, name...)
	return data
}

// memberHeader is the template of a token sequence's members' headers:
// archive/tar's ustar header of a file of mode 0644 modified at 0, with
// no owner, its device numbers left empty as the stage has always
// written them.
func memberHeader() *ustar.Template { return epochHeader().WithoutDevice() }

// epochHeader is archive/tar's ustar header of a file of mode 0644
// modified at 0 (the epoch), with no owner: a vision sequence's members'
// as vision.Writer.Write writes them, device numbers "0000000".
func epochHeader() *ustar.Template {
	t, err := ustar.NewTemplate(0o644, time.Unix(0, 0))
	if err != nil {
		panic(err) // 1970 is ustar's first second: a time it holds
	}
	return t
}

// convert writes tokens [from, from+n) as little-endian int32 into dst
// (4·n bytes) and returns -1, or the index (from from) of the first token
// that is negative or past int32.
func (d doc) convert(dst []byte, from, n int) int {
	src := d.data[from*d.size : (from+n)*d.size]
	le := binary.LittleEndian
	switch {
	case d.size == 1 && !d.sign:
		for i, v := range src {
			le.PutUint32(dst[4*i:], uint32(v))
		}
	case d.size == 2 && !d.sign:
		for i := range n {
			le.PutUint32(dst[4*i:], uint32(le.Uint16(src[2*i:])))
		}
	case d.size == 4 && d.sign:
		copy(dst, src)
		for i := range n {
			if src[4*i+3]&0x80 != 0 {
				return i
			}
		}
	default:
		for i := range n {
			id, ok := d.token(from + i)
			if !ok {
				return i
			}
			le.PutUint32(dst[4*i:], uint32(id))
		}
	}
	return -1
}

// token returns token t as an ID, false if it is negative or past int32.
func (d doc) token(t int) (int32, bool) {
	b := d.data[t*d.size:]
	var v int64
	switch {
	case d.size == 1 && d.sign:
		v = int64(int8(b[0]))
	case d.size == 1:
		v = int64(b[0])
	case d.size == 2 && d.sign:
		v = int64(int16(binary.LittleEndian.Uint16(b)))
	case d.size == 2:
		v = int64(binary.LittleEndian.Uint16(b))
	case d.size == 4 && d.sign:
		v = int64(int32(binary.LittleEndian.Uint32(b)))
	case d.size == 4:
		v = int64(binary.LittleEndian.Uint32(b))
	case d.sign:
		v = int64(binary.LittleEndian.Uint64(b))
	default:
		u := binary.LittleEndian.Uint64(b)
		if u > 1<<31-1 {
			return 0, false
		}
		v = int64(u)
	}
	if v < 0 || v > 1<<31-1 {
		return 0, false
	}
	return int32(v), true
}

// text is token t as its dtype reads it, for errors.
func (d doc) text(t int) string {
	b := d.data[t*d.size : (t+1)*d.size]
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	if d.sign && u>>(8*d.size-1) == 1 {
		return strconv.FormatInt(int64(u)-int64(1)<<(8*d.size), 10)
	}
	return strconv.FormatUint(u, 10)
}

// descrs maps NumPy's little-endian integer descriptors to their dtype
// names, sizes and signs.
var descrs = map[string]struct {
	dtype string
	size  int
	sign  bool
}{
	"|u1": {"uint8", 1, false}, "|i1": {"int8", 1, true}, "<u1": {"uint8", 1, false}, "<i1": {"int8", 1, true},
	"<u2": {"uint16", 2, false}, "<i2": {"int16", 2, true},
	"<u4": {"uint32", 4, false}, "<i4": {"int32", 4, true},
	"<u8": {"uint64", 8, false}, "<i8": {"int64", 8, true},
}

// parseDoc finds a document sample's one .npy member and its tokens.
func parseDoc(sample []byte, dtype string) (doc, error) {
	if b, ok := plainMember(sample); ok {
		return parseNPY(b, dtype)
	}
	br := bytes.NewReader(sample)
	tr := tar.NewReader(br)
	var found []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return doc{}, fmt.Errorf("%w: its tar members: %v", ErrDocument, err)
		}
		if h.Typeflag != tar.TypeReg || !strings.HasSuffix(h.Name, ".npy") {
			continue
		}
		if found != nil {
			return doc{}, fmt.Errorf("%w: more than one .npy member", ErrDocument)
		}
		off := int(br.Size()) - br.Len()
		if h.Size < 0 || int64(off)+h.Size > int64(len(sample)) {
			return doc{}, fmt.Errorf("%w: member %s runs past the sample", ErrDocument, h.Name)
		}
		found = sample[off : off+int(h.Size)]
		if br.Len() == 0 {
			break
		}
	}
	if found == nil {
		return doc{}, fmt.Errorf("%w: no .npy member", ErrDocument)
	}
	return parseNPY(found, dtype)
}

// plainMember is the data of a sample that is one plain ustar member
// named *.npy, as the formats' resident form writes a document (ok
// false for anything else, which archive/tar then reads): a header
// ustar.Plain reads, and nothing but padding and at most the
// end-of-archive blocks after its data.
func plainMember(sample []byte) ([]byte, bool) {
	if len(sample) < block {
		return nil, false
	}
	name, size, ok := ustar.Plain((*[block]byte)(sample))
	if !ok || !strings.HasSuffix(name, ".npy") || size > int64(len(sample)-block) {
		return nil, false
	}
	end := block + int(size)
	if rest := len(sample) - end; rest >= 2*block+block || (rest >= block && !ustar.IsZero(sample[end:])) {
		return nil, false // another member follows
	}
	return sample[block:end], true
}

// parseNPY reads a 1-D little-endian integer .npy.
func parseNPY(b []byte, dtype string) (doc, error) {
	h, start, err := npy.ReadHeader(b)
	if err != nil {
		return doc{}, fmt.Errorf("%w: %v", ErrDocument, err)
	}
	d, known := descrs[h.Descr]
	if !known {
		return doc{}, fmt.Errorf("%w: tokens of descriptor %q, not an integer's", ErrDocument, h.Descr)
	}
	if dtype != "" && d.dtype != dtype {
		return doc{}, fmt.Errorf("%w: tokens of dtype %s, the index says %s", ErrDocument, d.dtype, dtype)
	}
	if h.Fortran && d.size > 1 {
		return doc{}, fmt.Errorf("%w: a Fortran-ordered .npy", ErrDocument)
	}
	if len(h.Shape) != 1 {
		return doc{}, fmt.Errorf("%w: shape %v, not one dimension", ErrDocument, h.Shape)
	}
	n := h.Shape[0]
	data := b[start:]
	if n > int64(len(data)) || n*int64(d.size) != int64(len(data)) {
		return doc{}, fmt.Errorf("%w: shape %v and %d bytes of data", ErrDocument, h.Shape, len(data))
	}
	return doc{data: data, size: d.size, sign: d.sign, count: int(n)}, nil
}

// Figures are what the stage has packed: sequences, their tokens, those
// not pad, and the pieces that are part of a document (a document split
// across k sequences counts k).
type Figures struct {
	Sequences, Tokens, NonPad, Split int64
}

type figures struct {
	sequences, tokens, nonPad, split atomic.Int64
}

func (f *figures) add(o *Output, seqs, split int) {
	f.sequences.Add(int64(seqs))
	f.tokens.Add(o.Tokens)
	f.nonPad.Add(o.NonPad)
	f.split.Add(int64(split))
}

// Figures returns the stage's figures so far.
func (s *Stage) Figures() Figures {
	return Figures{Sequences: s.figures.sequences.Load(), Tokens: s.figures.tokens.Load(), NonPad: s.figures.nonPad.Load(),
		Split: s.figures.split.Load()}
}

// Stats returns the figures as /stats shows them: nil before any token
// job's batch.
func (s *Stage) Stats() *api.TokenStats {
	f := s.Figures()
	if f.Sequences == 0 {
		return nil
	}
	return &api.TokenStats{Sequences: f.Sequences, Tokens: f.Tokens, NonPad: f.NonPad, Fill: float64(f.NonPad) / float64(f.Tokens),
		SplitPieces: f.Split}
}
