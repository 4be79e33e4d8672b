package mds

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/keys"
)

// streamBuf is the buffer a streamed shard's header, size prefixes and
// small values pass through; a value of at least this many bytes is read
// from the response straight into its member.
const streamBuf = 4 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// DecodeStream implements format.Streamer for a raw shard: it reads the
// shard front to back as its bytes arrive, its header and each sample's
// size prefix first, so that it knows where every value goes before the
// value comes, and reads each raw value (an image, bytes, text) straight
// into its member, taking its CRC32C while it is in the processor's cache
// (format.Writer.Known); other values (scalars, ndarrays) are read into
// src and written from there as Decode writes them. The resident form is
// Decode's, byte for byte, and a damaged shard is damaged for the same
// reason. A compressed shard or a token dataset's is not streamed
// (format.ErrNotStreamed).
func (d *Decoder) DecodeStream(c int, sel format.Selection, open func(format.Range) (io.ReadCloser, error), src, dst []byte, wo format.WriterOptions) error {
	if c < 0 || c >= len(d.m.Shards) {
		return fmt.Errorf("mds: no shard %d", c)
	}
	s := d.m.Shards[c]
	if s.Compression != "" || d.m.Tokens != nil {
		return fmt.Errorf("%w: shard %s is compressed or holds tokens", format.ErrNotStreamed, s.Object)
	}
	if int64(len(src)) < s.Raw {
		return fmt.Errorf("mds: a buffer of %d bytes for shard %s of %d", len(src), s.Object, s.Raw)
	}
	rc, err := open(format.Range{Off: 0, Len: s.Raw})
	if err != nil {
		return fmt.Errorf("mds: reading shard %s: %w", s.Object, err)
	}
	defer rc.Close()
	st := &shardStream{s: s, r: bufio.NewReaderSize(rc, streamBuf), src: src[:s.Raw]}

	head := headerLen(s)
	if s.Raw < head {
		return damaged(s, "%d bytes cannot hold the header of %d samples", s.Raw, s.Samples)
	}
	if err := st.fill(head); err != nil {
		return err
	}
	offsets, err := d.header(s, st.src)
	if err != nil {
		return err
	}
	// Each sample ends where the next begins (offsets), so the shard is
	// read in order; what lies between the header and the first sample
	// (the shard's config, as Streaming writes it) is read into src with
	// the first sample's size prefixes and passed over.
	w, err := format.NewWriter(dst, s.Samples, wo)
	if err != nil {
		return err
	}
	names := keys.Append(nil, s.Stem, 0, s.Samples, keyWidth)
	sizes := make([]int64, len(d.encs))
	vars := int64(4 * d.vars())
	var scratch []byte
	for i := range s.Samples {
		lo, hi, err := sampleAt(s, offsets, i)
		if err != nil {
			return err
		}
		if err := st.fill(min(lo+vars, hi)); err != nil {
			return err
		}
		if _, err := d.columnSizes(s, i, st.src[lo:hi], sizes); err != nil {
			return err
		}
		if err := w.Begin(names[i]); err != nil {
			return fmt.Errorf("shard %s: sample %d: %w", s.Object, i, err)
		}
		for c, e := range d.encs {
			size := sizes[c]
			if !sel.Has(c) || e.kind != raw {
				if err := st.fill(st.at + size); err != nil {
					return err
				}
				if sel.Has(c) {
					if scratch, err = e.member(w, d.m.Columns[c].Ext, st.src[st.at-size:st.at], scratch); err != nil {
						return fmt.Errorf("shard %s: sample %d: column %q: %w", s.Object, i, d.m.Columns[c].Name, err)
					}
				}
				continue
			}
			m, err := w.Member(d.m.Columns[c].Ext, size)
			if err != nil {
				return fmt.Errorf("shard %s: sample %d: column %q: %w", s.Object, i, d.m.Columns[c].Name, err)
			}
			if err := st.read(m); err != nil {
				return err
			}
			w.Known(crc32.Update(0, castagnoli, m))
		}
	}
	if err := w.Finish(); err != nil {
		return err
	}
	// The last offset is the shard's end: every byte has been read.
	if st.at != s.Raw {
		return fmt.Errorf("mds: shard %s: streamed %d of its %d bytes", s.Object, st.at, s.Raw)
	}
	return nil
}

// shardStream reads a shard's bytes in order: into src at their offsets,
// or (read) into a member in their place, src's bytes there left
// unwritten.
type shardStream struct {
	s   shardMeta
	r   *bufio.Reader
	src []byte
	at  int64 // the shard's bytes read so far
}

// fill reads the shard's bytes up to end into src.
func (st *shardStream) fill(end int64) error {
	if end <= st.at {
		return nil
	}
	return st.read(st.src[st.at:end])
}

// read reads the shard's next len(p) bytes into p.
func (st *shardStream) read(p []byte) error {
	if _, err := io.ReadFull(st.r, p); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("mds: shard %s: the store's response ended within bytes %d–%d of %d", st.s.Object, st.at, st.at+int64(len(p)), st.s.Raw)
		}
		return fmt.Errorf("mds: reading shard %s: %w", st.s.Object, err)
	}
	st.at += int64(len(p))
	return nil
}
