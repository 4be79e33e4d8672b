package megatron

import (
	"encoding/binary"
	"fmt"

	"github.com/brandgw/brand/format"
)

// meta is a Megatron dataset as Index found it and Open reads it back.
type meta struct {
	code     byte
	prefixes []prefixMeta
	tokens   []uint32 // every document's tokens, prefix by prefix
	chunks   []chunk
}

type prefixMeta struct {
	name string
	docs int
}

// chunk is a span of one prefix's .bin: documents first..first+docs.
type chunk struct {
	prefix   int
	first    int   // the first document's number in its prefix
	at       int   // its index in meta.tokens
	docs     int   // documents
	off, len int64 // the span of the .bin
	resident int64 // the exact resident bound
}

// cut cuts every prefix into chunks of at most target resident bytes
// (and lim.ChunkSamples documents); a document larger than target is a
// chunk of its own, and one over lim.ChunkBytes is tooBig's error.
func (m *meta) cut(target int64, lim format.Limits, tooBig func(prefix, doc int, resident int64) error) error {
	dt := dtypes[m.code]
	m.chunks = m.chunks[:0]
	at := 0
	for pi, p := range m.prefixes {
		c := chunk{prefix: pi, at: at, resident: format.FooterLen}
		for d := range p.docs {
			n := m.tokens[at+d]
			r := docResident(keyLen(p.name, d), dt, n)
			if r+format.FooterLen > lim.ChunkBytes {
				return tooBig(pi, d, r+format.FooterLen)
			}
			if c.docs > 0 && (c.resident+r > target || c.docs == lim.ChunkSamples) {
				m.chunks = append(m.chunks, c)
				c = chunk{prefix: pi, first: d, at: at + d, off: c.off + c.len, resident: format.FooterLen}
			}
			c.docs++
			c.len += int64(n) * dt.size
			c.resident += r
		}
		if c.docs > 0 {
			m.chunks = append(m.chunks, c)
		}
		at += p.docs
	}
	return nil
}

// metaMagic and metaVersion open Meta.
const (
	metaMagic   = "BRANDMEG"
	metaVersion = 1
)

// marshal writes m as Meta: the dtype, each prefix's name, documents and
// chunks' document counts, then every document's tokens, as uvarints.
// Offsets and bounds are derived again by Open, so they cannot disagree.
func (m *meta) marshal() []byte {
	b := make([]byte, 0, 16+len(m.tokens)*3)
	b = append(b, metaMagic...)
	b = append(b, metaVersion, m.code)
	b = binary.AppendUvarint(b, uint64(len(m.prefixes)))
	ci := 0
	for pi, p := range m.prefixes {
		b = binary.AppendUvarint(b, uint64(len(p.name)))
		b = append(b, p.name...)
		b = binary.AppendUvarint(b, uint64(p.docs))
		n := 0
		for ci+n < len(m.chunks) && m.chunks[ci+n].prefix == pi {
			n++
		}
		b = binary.AppendUvarint(b, uint64(n))
		for _, c := range m.chunks[ci : ci+n] {
			b = binary.AppendUvarint(b, uint64(c.docs))
		}
		ci += n
	}
	for _, n := range m.tokens {
		b = binary.AppendUvarint(b, uint64(n))
	}
	return b
}

// unmarshal reads Meta back, checking every count against what follows.
func unmarshal(b []byte) (*meta, error) {
	bad := func(what string) (*meta, error) {
		return nil, fmt.Errorf("%w: megatron meta: %s", format.ErrInvalid, what)
	}
	if len(b) < len(metaMagic)+2 || string(b[:len(metaMagic)]) != metaMagic || b[len(metaMagic)] != metaVersion {
		return bad("not a Megatron layout")
	}
	m := &meta{code: b[len(metaMagic)+1]}
	dt, ok := dtypes[m.code]
	if !ok {
		return bad("unknown dtype")
	}
	b = b[len(metaMagic)+2:]
	next := func() (int, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 1<<40 { // each count is checked against the bytes left by its caller
			return 0, false
		}
		b = b[n:]
		return int(v), true
	}
	np, ok := next()
	if !ok || np > len(b) {
		return bad("prefix count")
	}
	total := 0
	for pi := range np {
		l, ok := next()
		if !ok || l > len(b) {
			return bad("prefix name")
		}
		p := prefixMeta{name: string(b[:l])}
		b = b[l:]
		if p.docs, ok = next(); !ok || p.docs > len(b) {
			return bad("document count")
		}
		nc, ok := next()
		if !ok || nc > len(b) {
			return bad("chunk count")
		}
		first := 0
		for range nc {
			d, ok := next()
			if !ok || d == 0 || first+d > p.docs {
				return bad("chunk document count")
			}
			m.chunks = append(m.chunks, chunk{prefix: pi, first: first, at: total + first, docs: d})
			first += d
		}
		if first != p.docs {
			return bad("chunks do not cover the prefix's documents")
		}
		m.prefixes = append(m.prefixes, p)
		total += p.docs
	}
	if total > len(b) {
		return bad("token counts")
	}
	m.tokens = make([]uint32, total)
	for i := range m.tokens {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 1<<32-1 {
			return bad("token count")
		}
		m.tokens[i] = uint32(v)
		b = b[n:]
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	var off int64
	for i := range m.chunks {
		c := &m.chunks[i]
		if c.first == 0 {
			off = 0
		}
		c.off, c.resident = off, format.FooterLen
		name := m.prefixes[c.prefix].name
		for d := range c.docs {
			n := m.tokens[c.at+d]
			c.len += int64(n) * dt.size
			c.resident += docResident(keyLen(name, c.first+d), dt, n)
		}
		off += c.len
	}
	return m, nil
}
