package chunkindex

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/brandgw/brand/internal/codec/ustar"
)

// Member is one file of a sample, written as one tar member.
type Member struct {
	// Name is the full member path; SplitKey(Name) must give the sample key.
	Name string
	// Size is the exact number of bytes Body yields.
	Size int64
	// Mode holds the permission bits; 0 means 0644.
	Mode int64
	// ModTime is stored rounded to the second; the zero Time means the Unix
	// epoch, so that packing the same files twice yields identical chunks.
	ModTime time.Time
	// Body supplies the member's contents. It may be nil when Size is 0.
	Body io.Reader
}

// ChunkWriter writes samples as tar members and reports each sample's byte
// range and CRC32C as it goes, so a chunk and its index entries are produced
// in one pass without reading the chunk back.
//
// Headers carry no owner names and zero ids, so chunks are reproducible;
// they are archive/tar's choice (written through ustar.AppendHeader): ustar,
// and pax only for what ustar cannot hold (long or non-ASCII names, huge
// sizes).
//
// A ChunkWriter is not safe for concurrent use.
type ChunkWriter struct {
	cw     *crcWriter
	hdr    []byte // a member's header blocks, the room reused
	seen   map[string]bool
	err    error // sticky: the tar stream is unusable after a failed write
	closed bool
}

// NewChunkWriter returns a ChunkWriter that writes a tar to w. Call Close to
// write the end-of-archive marker; Close does not close w.
func NewChunkWriter(w io.Writer) *ChunkWriter {
	cw := &crcWriter{w: w}
	return &ChunkWriter{cw: cw, seen: map[string]bool{}}
}

// Size returns the number of bytes written to the underlying writer so far.
func (w *ChunkWriter) Size() int64 { return w.cw.n }

// WriteSample writes one sample, its members in the order given, and returns
// where its bytes are in the chunk: offset and length (a multiple of
// BlockSize, headers and padding included) and their CRC32C. ScanTar reports
// the same values for the same sample.
//
// Arguments are checked before anything is written: an empty key, no
// members, a member whose name does not split to key, a repeated member name,
// a negative size or a key already written to this chunk (ErrDuplicateKey)
// return an error and leave the chunk intact. An error while writing (from the
// underlying writer, or a Body shorter or longer than Size) leaves a partial
// member in the stream, so it is returned again by every later call.
func (w *ChunkWriter) WriteSample(key string, members []Member) (offset, length int64, crc uint32, err error) {
	offset, length, crc, _, err = w.WriteSampleFiles(key, members)
	return offset, length, crc, err
}

// WriteSampleFiles is WriteSample that also describes the members written
// for the member table, as ScanTar's TarSample.Files does.
func (w *ChunkWriter) WriteSampleFiles(key string, members []Member) (offset, length int64, crc uint32, files []MemberInfo, err error) {
	if w.closed {
		return 0, 0, 0, nil, ErrWriterClosed
	}
	if w.err != nil {
		return 0, 0, 0, nil, w.err
	}
	if err := w.check(key, members); err != nil {
		return 0, 0, 0, nil, err
	}
	w.seen[key] = true
	offset = w.cw.n
	w.cw.crc = 0
	files = make([]MemberInfo, len(members))
	for i := range members {
		if files[i], err = w.writeMember(&members[i]); err != nil {
			w.err = fmt.Errorf("chunkindex: writing sample %q member %q: %w", key, members[i].Name, err)
			return 0, 0, 0, nil, w.err
		}
		files[i].DataOffset -= offset
	}
	return offset, w.cw.n - offset, w.cw.crc, files, nil
}

func (w *ChunkWriter) check(key string, members []Member) error {
	if key == "" {
		return fmt.Errorf("chunkindex: empty sample key")
	}
	if len(members) == 0 {
		return fmt.Errorf("chunkindex: sample %q has no members", key)
	}
	if w.seen[key] {
		return fmt.Errorf("chunkindex: %w %q: already written to this chunk", ErrDuplicateKey, key)
	}
	for i, m := range members {
		if p := memberNameProblem(m.Name); p != "" {
			return fmt.Errorf("chunkindex: sample %q member %q: %s", key, m.Name, p)
		}
		if k, _ := SplitKey(m.Name); k != key {
			return fmt.Errorf("chunkindex: sample %q member %q: name has key %q", key, m.Name, k)
		}
		if m.Size < 0 {
			return fmt.Errorf("chunkindex: sample %q member %q: negative size %d", key, m.Name, m.Size)
		}
		if m.Body == nil && m.Size > 0 {
			return fmt.Errorf("chunkindex: sample %q member %q: nil body for %d bytes", key, m.Name, m.Size)
		}
		for _, prev := range members[:i] {
			if prev.Name == m.Name {
				return fmt.Errorf("chunkindex: sample %q: member %q appears twice", key, m.Name)
			}
		}
	}
	return nil
}

// writeMember writes one member — its header, data and padding, so that
// a sample's range ends on a block — and describes it, its DataOffset
// from the start of the chunk.
func (w *ChunkWriter) writeMember(m *Member) (MemberInfo, error) {
	mode, mtime := m.Mode, m.ModTime
	if mode == 0 {
		mode = 0o644
	}
	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	mtime = mtime.Round(time.Second)
	var err error
	w.hdr, err = ustar.AppendHeader(w.hdr[:0], ustar.Header{Name: m.Name, Size: m.Size, Mode: mode, ModTime: mtime, Format: ustar.Any})
	if err != nil {
		return MemberInfo{}, err
	}
	if _, err := w.cw.Write(w.hdr); err != nil {
		return MemberInfo{}, err
	}
	_, ext := SplitKey(m.Name)
	info := MemberInfo{Ext: ext, DataOffset: w.cw.n, Size: m.Size, ModTime: time.Unix(mtime.Unix(), 0).UTC()}
	if m.Size == 0 && m.Body == nil {
		return info, nil
	}
	dc := &crcWriter{w: w.cw}
	n, err := io.CopyN(dc, m.Body, m.Size)
	if errors.Is(err, io.EOF) {
		return MemberInfo{}, fmt.Errorf("body ended after %d of %d bytes: %w", n, m.Size, io.ErrUnexpectedEOF)
	}
	if err != nil {
		return MemberInfo{}, err
	}
	info.CRC = dc.crc
	// A longer body means Size was wrong; the caller's idea of the sample
	// disagrees with the chunk, so fail rather than truncate silently.
	var one [1]byte
	if k, _ := io.ReadFull(m.Body, one[:]); k > 0 {
		return MemberInfo{}, fmt.Errorf("body longer than size %d", m.Size)
	}
	// The padding to a block: zeros, as the marker's are.
	if _, err := w.cw.Write(EndOfArchive[:ustar.Padded(m.Size)-m.Size]); err != nil {
		return MemberInfo{}, err
	}
	return info, nil
}

// Close writes the end-of-archive marker. It does not close the underlying
// writer. Calling Close again returns ErrWriterClosed.
func (w *ChunkWriter) Close() error {
	if w.closed {
		return ErrWriterClosed
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	if _, err := w.cw.Write(EndOfArchive[:]); err != nil {
		return fmt.Errorf("chunkindex: closing chunk: %w", err)
	}
	return nil
}

// crcWriter counts and checksums what is written through it.
type crcWriter struct {
	w   io.Writer
	n   int64
	crc uint32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	c.n += int64(n)
	return n, err
}
