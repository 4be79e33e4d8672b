package stored

import (
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/errkind"
)

// The checks of a chunk's bytes against the checksums of a dataset served
// in place (`brand index --checksums`): the index holds the CRC32C of every
// span of every chunk's object (the ranges its format reads it in with any
// of its fields), and every read of a chunk checks the spans it read
// before its bytes are decoded.

// ErrChecksum marks bytes of a chunk's object that differ from the CRC32C
// the index recorded for them: the file was changed or damaged since it
// was indexed. The store no longer matches the index: rebuild it.
var ErrChecksum = errkind.Named(errkind.Upstream, "store_mismatch", "bytes differ from their indexed CRC32C")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CheckSpans checks the bytes of chunk c of ix read from object: ranges
// (a decoder's Extent, ascending) held back to back in src. Each range
// must be made of whole spans of the chunk; a span whose bytes differ from
// its CRC32C is an error wrapping ErrChecksum, a range the spans do not
// make one wrapping chunkindex.ErrCorrupt. An index without checksums
// checks nothing.
func CheckSpans(ix *chunkindex.Index, c int, object string, ranges []format.Range, src []byte) error {
	spans := ix.Spans(c)
	if spans == nil {
		return nil
	}
	at := int64(0)
	for _, r := range ranges {
		ss, err := spansIn(spans, r, object)
		if err != nil {
			return err
		}
		for _, s := range ss {
			b := src[at+s.Off-r.Off : at+s.End()-r.Off]
			if got := crc32.Checksum(b, castagnoli); got != s.CRC {
				return spanError(object, s, got)
			}
		}
		at += r.Len
	}
	return nil
}

// DamagedSpans is CheckSpans for a chunk whose format confines damage
// (format.Confiner): every span of the ranges whose bytes differ from
// its CRC32C, each as a format.Damage naming the bytes, rather than the
// first as an error. An error is a range the spans do not make (wrapping
// chunkindex.ErrCorrupt).
func DamagedSpans(ix *chunkindex.Index, c int, object string, ranges []format.Range, src []byte) ([]format.Damage, error) {
	spans := ix.Spans(c)
	if spans == nil {
		return nil, nil
	}
	var out []format.Damage
	at := int64(0)
	for _, r := range ranges {
		ss, err := spansIn(spans, r, object)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			b := src[at+s.Off-r.Off : at+s.End()-r.Off]
			if got := crc32.Checksum(b, castagnoli); got != s.CRC {
				out = append(out, format.Damage{Range: format.Range{Off: s.Off, Len: s.Len},
					Cause: fmt.Sprintf("bytes %d+%d of %s have CRC32C %08x, indexed %08x", s.Off, s.Len, object, got, s.CRC)})
			}
		}
		at += r.Len
	}
	return out, nil
}

// spansIn returns the spans that make range r of object, or an error
// wrapping chunkindex.ErrCorrupt if they do not.
func spansIn(spans []chunkindex.Span, r format.Range, object string) ([]chunkindex.Span, error) {
	i, _ := slices.BinarySearchFunc(spans, r.Off, func(s chunkindex.Span, off int64) int {
		switch {
		case s.Off < off:
			return -1
		case s.Off > off:
			return 1
		}
		return 0
	})
	j, end := i, r.Off
	for ; j < len(spans) && end < r.End() && spans[j].Off == end; j++ {
		end = spans[j].End()
	}
	if r.Len > 0 && end != r.End() {
		return nil, fmt.Errorf("%w: the index's checksums do not cover bytes %d+%d of %s in whole spans", chunkindex.ErrCorrupt, r.Off, r.Len, object)
	}
	return spans[i:j], nil
}

func spanError(object string, s chunkindex.Span, got uint32) error {
	return fmt.Errorf("%w: bytes %d+%d of %s have CRC32C %08x, indexed %08x: the file changed or was damaged since it was indexed",
		ErrChecksum, s.Off, s.Len, object, got, s.CRC)
}

// SpanChecker checks chunk c's bytes against its spans as a decoder that
// streams them reads them (format.Streamer.DecodeStream): each range it
// opens is read through Wrap, which checks every span as its last byte
// passes and fails the read that completes a span whose bytes differ.
// Err says afterwards whether every span of the ranges was read whole and
// matched. It is safe for concurrent use.
type SpanChecker struct {
	ix     *chunkindex.Index
	c      int
	object string

	mu      sync.Mutex
	err     error
	pending int // spans opened and not yet checked
}

// NewSpanChecker returns the checker of chunk c of ix, read from object.
func NewSpanChecker(ix *chunkindex.Index, c int, object string) *SpanChecker {
	return &SpanChecker{ix: ix, c: c, object: object}
}

// Wrap returns rc, the bytes of range r, read through the checker. An
// index without checksums checks nothing.
func (k *SpanChecker) Wrap(r format.Range, rc io.ReadCloser) (io.ReadCloser, error) {
	spans := k.ix.Spans(k.c)
	if spans == nil {
		return rc, nil
	}
	ss, err := spansIn(spans, r, k.object)
	if err != nil {
		rc.Close()
		k.fail(err)
		return nil, err
	}
	k.mu.Lock()
	k.pending += len(ss)
	k.mu.Unlock()
	return &spanReader{k: k, rc: rc, spans: ss, at: r.Off}, nil
}

// Err is the first span that did not match, or an error if a span
// opened was not read whole; nil when every one read matched.
func (k *SpanChecker) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil && k.pending > 0 {
		return fmt.Errorf("dataset: %d spans of %s were not read whole, so not checked", k.pending, k.object)
	}
	return k.err
}

func (k *SpanChecker) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		k.err = err
	}
}

// spanReader is one range's bytes read through a SpanChecker.
type spanReader struct {
	k     *SpanChecker
	rc    io.ReadCloser
	spans []chunkindex.Span // not yet checked, in order
	at    int64             // the object's offset of the next byte
	crc   uint32            // of spans[0]'s bytes read so far
}

func (s *spanReader) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	for b := p[:n]; len(b) > 0 && len(s.spans) > 0; {
		sp := s.spans[0]
		m := min(int64(len(b)), sp.End()-s.at)
		s.crc = crc32.Update(s.crc, castagnoli, b[:m])
		s.at += m
		b = b[m:]
		if s.at < sp.End() {
			break
		}
		got := s.crc
		s.spans, s.crc = s.spans[1:], 0
		s.k.mu.Lock()
		s.k.pending--
		s.k.mu.Unlock()
		if got != sp.CRC {
			e := spanError(s.k.object, sp, got)
			s.k.fail(e)
			return n, e
		}
	}
	return n, err
}

func (s *spanReader) Close() error { return s.rc.Close() }
