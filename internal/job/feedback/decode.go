package feedback

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unsafe"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/job/catalog"
)

// Decoding feedback bodies (docs/http-api.md) as they arrive: nothing
// holds a whole body, and what a body says is held as 8 bytes a record,
// however it was written. Every record is checked before any is applied,
// so a body is applied whole or not at all.

// MaxBodyBytes bounds a feedback body: a million samples in the binary
// form.
const MaxBodyBytes = 8 << 20

// blockLen is the records of one block of records: 64 KiB.
const blockLen = 8 << 10

// record is one sample's reported loss.
type record struct {
	id   uint32
	loss float32
}

// records are a feedback body's records, in blocks of blockLen so that
// holding more never copies what is held.
type records struct {
	blocks [][]record
	n      int
	pool   *blocks // where the blocks come from and go back to; nil: none
}

// push appends a zero record and returns it.
func (r *records) push() *record {
	if r.n == len(r.blocks)*blockLen {
		r.blocks = append(r.blocks, r.pool.get())
	}
	r.n++
	rec := r.at(r.n - 1)
	*rec = record{}
	return rec
}

// release gives the blocks back; the records are gone.
func (r *records) release() {
	for _, b := range r.blocks {
		r.pool.put(b)
	}
	r.blocks, r.n = nil, 0
}

// blocks recycles blocks of records through the node's pools: a body's
// records are garbage once applied, and reused they do not double the
// heap between collections when bodies keep coming. A block is a pooled
// buffer of bytes seen as records (which hold no pointers, so the
// collector need not know). Safe for concurrent use; a nil *blocks, or
// one without pools, allocates.
type blocks struct{ bufs Buffers }

// Buffers are the node's pools (memory.Manager's Get and Put).
type Buffers interface {
	Get(n int64) []byte
	Put(b []byte)
}

const blockBytes = blockLen * unsafe.Sizeof(record{})

func (b *blocks) get() []record {
	if b != nil && b.bufs != nil {
		buf := b.bufs.Get(int64(blockBytes))[:blockBytes]
		p := unsafe.SliceData(buf)
		if uintptr(unsafe.Pointer(p))%unsafe.Alignof(record{}) == 0 {
			blk := unsafe.Slice((*record)(unsafe.Pointer(p)), blockLen)
			clear(blk)
			return blk
		}
	}
	return make([]record, blockLen)
}

func (b *blocks) put(blk []record) {
	if b != nil && b.bufs != nil {
		b.bufs.Put(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(blk))), blockBytes))
	}
}

// at returns record i < r.n.
func (r *records) at(i int) *record { return &r.blocks[i/blockLen][i%blockLen] }

// apply adds the records to acc, a block at a time.
func (r *records) apply(acc *importance.Accumulator) error {
	ids := make([]int, 0, blockLen)
	losses := make([]float32, 0, blockLen)
	for b, blk := range r.blocks {
		blk = blk[:min(blockLen, r.n-b*blockLen)]
		ids, losses = ids[:0], losses[:0]
		for _, rec := range blk {
			ids = append(ids, int(rec.id))
			losses = append(losses, rec.loss)
		}
		if err := acc.Add(ids, losses); err != nil {
			return err // checked already: only a changed importance.Accumulator gets here
		}
	}
	return nil
}

// decoder reads one feedback body for a dataset.
type decoder struct {
	ctx        context.Context // of the request: bounds key lookups; nil: none
	ds         *catalog.Dataset
	maxRecords int
	pool       *blocks // nil: records are allocated
}

// decode reads a feedback body of either form: JSON ({"keys"|"ids",
// "losses"}) or, with contentType application/octet-stream, records of
// (uint32 sample ID, float32 loss), little-endian. It reads at most
// MaxBodyBytes.
func (d decoder) decode(contentType string, body io.Reader) (*records, error) {
	in := &capped{r: body, left: MaxBodyBytes}
	recs := &records{pool: d.pool}
	var err error
	if strings.HasPrefix(contentType, "application/octet-stream") {
		err = d.binary(in, recs)
	} else {
		err = d.json(in, recs)
	}
	switch {
	case err == nil:
		return recs, nil
	case in.err != nil: // the body, not its contents
		err = in.err
	case !errors.Is(err, ErrBadFeedback):
		err = fmt.Errorf("%w: feedback is JSON {\"keys\" or \"ids\": [...], \"losses\": [...]} or application/octet-stream: %v", ErrBadFeedback, err)
	}
	recs.release()
	return nil, err
}

// capped reads at most left bytes of r, remembering why it stopped.
type capped struct {
	r    io.Reader
	left int64
	err  error // past the bound, or r's failure other than EOF
}

func (c *capped) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	if c.left -= int64(n); c.left < 0 {
		c.err = fmt.Errorf("%w: feedback over %d bytes; send it in parts", ErrBadFeedback, MaxBodyBytes)
		return n + int(c.left), c.err
	}
	if err != nil && err != io.EOF {
		c.err = fmt.Errorf("%w: reading feedback: %w", ErrBadFeedback, err)
		return n, c.err
	}
	return n, err
}

// check rejects a record a dataset cannot take; k is its place in the
// body, for the message.
func (d decoder) check(k int, rec record) error {
	if int64(rec.id) >= int64(d.ds.Index.NumSamples()) {
		return fmt.Errorf("%w: entry %d: sample ID %d not in [0, %d)", ErrBadFeedback, k, rec.id, d.ds.Index.NumSamples())
	}
	if l := rec.loss; !(l >= 0) || math.IsInf(float64(l), 1) {
		return fmt.Errorf("%w: entry %d (sample %d): loss %v; losses must be finite and >= 0", ErrBadFeedback, k, rec.id, l)
	}
	return nil
}

// more adds a record, refusing more than the bound.
func (d decoder) more(recs *records) (*record, error) {
	if recs.n >= d.maxRecords {
		return nil, fmt.Errorf("%w: more than %d records in one body; send it in parts", ErrBadFeedback, d.maxRecords)
	}
	return recs.push(), nil
}

// binary reads (uint32 ID, float32 loss) records into recs, 64 KiB at a
// time.
func (d decoder) binary(r io.Reader, recs *records) error {
	buf := make([]byte, blockLen*8)
	held, total := 0, 0
	for {
		n, err := r.Read(buf[held:])
		held, total = held+n, total+n
		whole := held - held%8
		for off := 0; off < whole; off += 8 {
			rec, err := d.more(recs)
			if err != nil {
				return err
			}
			rec.id = binary.LittleEndian.Uint32(buf[off:])
			rec.loss = math.Float32frombits(binary.LittleEndian.Uint32(buf[off+4:]))
			if err := d.check(recs.n-1, *rec); err != nil {
				return err
			}
		}
		held = copy(buf, buf[whole:held])
		switch {
		case err == io.EOF && held != 0:
			return fmt.Errorf("%w: binary feedback is 8-byte records (uint32 ID, float32 loss); got %d bytes", ErrBadFeedback, total)
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
}
