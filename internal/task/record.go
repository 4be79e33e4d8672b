package task

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// The kinds of record.
const (
	recLease    byte = 1 // a generator asks for prompts
	recFeedback byte = 2 // a lease's answers
	recTrainer  byte = 3 // the trainer's step
	recTick     byte = 4 // time passes (a late answer's refusal is made final)
	// recLeaseReq is a lease asked with the generator's request ID: asked
	// again (a retry whose first try reached the gateway, its answer lost)
	// it is the open lease that ID made, not a second one.
	recLeaseReq byte = 5
	// recExclude takes prompts out of the job at once (edits.go).
	recExclude byte = 6
	// recAppend adds a domain's prompts of an index version extending
	// its own to its next pass.
	recAppend byte = 7
	// recRatios changes the domains' ratios from a step on.
	recRatios byte = 8
)

// Record is one request a job's log holds: the request, not its
// decision, which Plan.Apply derives. T is when it was applied, in
// milliseconds since the job was made.
type Record struct {
	Kind byte
	T    uint64
	// A lease: the generator and the prompts it asks for, and the
	// request's ID if it gave one (recLeaseReq).
	Gen string
	K   uint32
	Req string
	// Feedback: the lease (its number) and the answers.
	Lease uint64
	Rows  []Row
	// The trainer: the step it is at; a ratio edit: the step it applies
	// from.
	Step uint64
	// An exclusion: the prompts. An append: the domain, the index
	// version it grows to, and its new prompts (Index names them).
	IDs    []uint32
	Domain uint16
	Index  string
	N      uint32
	// A ratio edit: each domain's weight.
	Weights []uint64
}

// Row is one prompt's answer.
type Row struct {
	Prompt  uint32
	Version uint32
	// Counts overrides the policy's verdict: 0 not, 1 false, 2 true.
	Counts uint8
	// Passes of N, or Scores (Passes and N then derived).
	Passes, N uint16
	Scores    []float32
}

// size is about r's bytes in a segment, at most.
func (r Record) size() int {
	n := 32 + len(r.Gen) + len(r.Req) + 5*len(r.IDs) + len(r.Index) + 10*len(r.Weights)
	for _, w := range r.Rows {
		n += 24 + 4*len(w.Scores)
	}
	return n
}

// segment layout: magic, the writer's nonce, the digest of the decisions
// before it, the number of records, the records, a CRC-32C of all before.
var magic = [4]byte{'B', 'T', 'S', '1'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errDamaged = errors.New("damaged segment")

// encodeSegment is recs as a segment, written by the node of nonce after
// decisions of digest.
func encodeSegment(nonce, digest uint64, recs []Record) []byte {
	b := append([]byte(nil), magic[:]...)
	b = binary.LittleEndian.AppendUint64(b, nonce)
	b = binary.LittleEndian.AppendUint64(b, digest)
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for _, r := range recs {
		b = append(b, r.Kind)
		b = binary.AppendUvarint(b, r.T)
		switch r.Kind {
		case recLease, recLeaseReq:
			b = binary.AppendUvarint(b, uint64(len(r.Gen)))
			b = append(b, r.Gen...)
			b = binary.AppendUvarint(b, uint64(r.K))
			if r.Kind == recLeaseReq {
				b = binary.AppendUvarint(b, uint64(len(r.Req)))
				b = append(b, r.Req...)
			}
		case recFeedback:
			b = binary.AppendUvarint(b, r.Lease)
			b = binary.AppendUvarint(b, uint64(len(r.Rows)))
			for _, w := range r.Rows {
				b = binary.AppendUvarint(b, uint64(w.Prompt))
				b = binary.AppendUvarint(b, uint64(w.Version))
				flags := w.Counts
				if w.Scores != nil {
					flags |= 4
				}
				b = append(b, flags)
				if w.Scores != nil {
					b = binary.AppendUvarint(b, uint64(len(w.Scores)))
					for _, s := range w.Scores {
						b = binary.LittleEndian.AppendUint32(b, math.Float32bits(s))
					}
				} else {
					b = binary.AppendUvarint(b, uint64(w.Passes))
					b = binary.AppendUvarint(b, uint64(w.N))
				}
			}
		case recTrainer:
			b = binary.AppendUvarint(b, r.Step)
		case recExclude:
			b = binary.AppendUvarint(b, uint64(len(r.IDs)))
			for _, q := range r.IDs {
				b = binary.AppendUvarint(b, uint64(q))
			}
		case recAppend:
			b = binary.AppendUvarint(b, uint64(r.Domain))
			b = binary.AppendUvarint(b, uint64(len(r.Index)))
			b = append(b, r.Index...)
			b = binary.AppendUvarint(b, uint64(r.N))
		case recRatios:
			b = binary.AppendUvarint(b, r.Step)
			b = binary.AppendUvarint(b, uint64(len(r.Weights)))
			for _, w := range r.Weights {
				b = binary.AppendUvarint(b, w)
			}
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// segment is a decoded segment.
type segment struct {
	nonce, digest uint64
	recs          []Record
}

// decodeSegment decodes a segment, refusing one that fails its checksum
// or its layout (errDamaged).
func decodeSegment(b []byte) (segment, error) {
	var s segment
	if len(b) < 4+8+8+1+4 || [4]byte(b[:4]) != magic {
		return s, fmt.Errorf("%w: %d bytes, not a segment", errDamaged, len(b))
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return s, fmt.Errorf("%w: checksum", errDamaged)
	}
	d := decoder{b: body[4:]}
	s.nonce, s.digest = d.u64(), d.u64()
	n := d.uvarint(1 << 20)
	s.recs = make([]Record, 0, min(n, 1024))
	for range n {
		r := Record{Kind: d.byte(), T: d.uvarint(math.MaxUint64)}
		switch r.Kind {
		case recLease, recLeaseReq:
			r.Gen = string(d.bytes(MaxGenName))
			r.K = uint32(d.uvarint(MaxLease))
			if r.Kind == recLeaseReq {
				r.Req = string(d.bytes(MaxRequestID))
			}
		case recFeedback:
			r.Lease = d.uvarint(math.MaxUint64)
			rows := d.uvarint(MaxLease)
			r.Rows = make([]Row, rows)
			for i := range r.Rows {
				w := &r.Rows[i]
				w.Prompt = uint32(d.uvarint(math.MaxUint32))
				w.Version = uint32(d.uvarint(math.MaxUint32))
				flags := d.byte()
				w.Counts = flags & 3
				if flags&4 != 0 {
					w.Scores = make([]float32, d.uvarint(MaxScores))
					for j := range w.Scores {
						w.Scores[j] = math.Float32frombits(d.u32())
					}
				} else {
					w.Passes = uint16(d.uvarint(math.MaxUint16))
					w.N = uint16(d.uvarint(math.MaxUint16))
				}
			}
		case recTrainer:
			r.Step = d.uvarint(math.MaxUint64)
		case recExclude:
			r.IDs = make([]uint32, d.uvarint(MaxExclude))
			for i := range r.IDs {
				r.IDs[i] = uint32(d.uvarint(math.MaxUint32))
			}
		case recAppend:
			r.Domain = uint16(d.uvarint(MaxDomains - 1))
			r.Index = string(d.bytes(64))
			r.N = uint32(d.uvarint(MaxPrompts))
		case recRatios:
			r.Step = d.uvarint(math.MaxUint64)
			r.Weights = make([]uint64, d.uvarint(MaxDomains))
			for i := range r.Weights {
				r.Weights[i] = d.uvarint(math.MaxUint64)
			}
		case recTick:
		default:
			d.err = fmt.Errorf("record kind %d", r.Kind)
		}
		if d.err != nil {
			break
		}
		s.recs = append(s.recs, r)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d bytes after the records", len(d.b))
	}
	if d.err != nil {
		return segment{}, fmt.Errorf("%w: %v", errDamaged, d.err)
	}
	return s, nil
}

// decoder reads a segment's fields, keeping the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = errors.New(what)
	}
	d.b = nil
}

func (d *decoder) uvarint(limit uint64) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > limit {
		d.fail("bad number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("short")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) u32() uint32 {
	if len(d.b) < 4 {
		d.fail("short")
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.fail("short")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) bytes(limit uint64) []byte {
	n := d.uvarint(limit)
	if uint64(len(d.b)) < n {
		d.fail("short")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}
