package chunkindex

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"strings"
	"time"
)

// MembersKey is where a dataset's member table is stored, beside the
// index (docs/format.md §5).
const MembersKey = "_brand/members"

// membersMagic starts every member table.
const membersMagic = "BRANDMEM"

// MembersVersion is the member table format version this package writes.
const MembersVersion = 1

const (
	membersHeaderLen = 48 // magic, version, flags, index ID, N, M, E, X
	memberRecordLen  = 24 // ext id, data offset, size, mtime, CRC32C
	maxMembers       = 1<<16 - 1
)

// MemberInfo is one file of a sample: the tar member named key.Ext (key
// alone when Ext is empty).
type MemberInfo struct {
	Ext string
	// DataOffset is where the member's data starts, from the start of its
	// sample's byte range: a multiple of BlockSize, past its headers.
	DataOffset int64
	Size       int64     // bytes of data, padding excluded
	ModTime    time.Time // from the tar header, whole seconds
	CRC        uint32    // CRC32C of the data
}

// Members is a dataset's member table: every sample's files, so that a
// file can be named, listed and read out of its sample without reading the
// chunk (the S3 face does). It is a separate object rather than part of
// the index so that the index, whose ID names the dataset's content in
// every ETag and places its chunks on a cluster, keeps its bytes; the
// table names the index ID it describes.
//
// Members is immutable and safe for concurrent use. It costs 24 bytes a
// member and 4 a sample.
type Members struct {
	id     string
	exts   []string
	starts []uint32 // sample i's members are [starts[i], starts[i+1])
	recs   []byte   // memberRecordLen bytes a member
}

// IndexID is the ID of the index the table describes.
func (m *Members) IndexID() string { return m.id }

// Len is the number of members of all samples.
func (m *Members) Len() int { return len(m.recs) / memberRecordLen }

// NumSamples is the number of samples the table describes.
func (m *Members) NumSamples() int { return len(m.starts) - 1 }

// Count is the number of members of sample id.
func (m *Members) Count(id int) int { return int(m.starts[id+1] - m.starts[id]) }

// Member is member j of sample id, in archive order.
func (m *Members) Member(id, j int) MemberInfo {
	r := m.recs[(int(m.starts[id])+j)*memberRecordLen:]
	return MemberInfo{Ext: m.exts[le.Uint32(r)], DataOffset: int64(le.Uint32(r[4:])), Size: int64(le.Uint32(r[8:])),
		ModTime: time.Unix(int64(le.Uint64(r[12:])), 0).UTC(), CRC: le.Uint32(r[20:])}
}

// Find is the member of sample id whose extension is ext.
func (m *Members) Find(id int, ext string) (j int, ok bool) {
	base := int(m.starts[id])
	for j := range m.Count(id) {
		if m.exts[le.Uint32(m.recs[(base+j)*memberRecordLen:])] == ext {
			return j, true
		}
	}
	return 0, false
}

// Extensions are the distinct extensions of the table's members, in order
// of first appearance.
func (m *Members) Extensions() []string { return append([]string(nil), m.exts...) }

// MembersBuilder collects samples' members, in sample ID order, into a
// member table.
type MembersBuilder struct {
	exts   []string
	extID  map[string]uint32
	counts []uint16
	recs   []byte
}

// Add appends the members of the next sample; id must be the number of
// samples added before it.
func (b *MembersBuilder) Add(id int, members []MemberInfo) error {
	if id != len(b.counts) {
		return fmt.Errorf("chunkindex: member table: sample %d added after %d samples", id, len(b.counts))
	}
	if len(members) == 0 || len(members) > maxMembers {
		return fmt.Errorf("chunkindex: member table: sample %d has %d members", id, len(members))
	}
	if b.extID == nil {
		b.extID = map[string]uint32{}
	}
	for _, m := range members {
		x, ok := b.extID[m.Ext]
		if !ok {
			x = uint32(len(b.exts))
			b.extID[m.Ext] = x
			b.exts = append(b.exts, m.Ext)
		}
		if m.DataOffset < 0 || m.DataOffset > 1<<32-1 || m.Size < 0 || m.Size > 1<<32-1 {
			return fmt.Errorf("chunkindex: member table: sample %d member %q: offset %d, size %d out of range", id, m.Ext, m.DataOffset, m.Size)
		}
		var r [memberRecordLen]byte
		le.PutUint32(r[0:], x)
		le.PutUint32(r[4:], uint32(m.DataOffset))
		le.PutUint32(r[8:], uint32(m.Size))
		le.PutUint64(r[12:], uint64(m.ModTime.Unix()))
		le.PutUint32(r[20:], m.CRC)
		b.recs = append(b.recs, r[:]...)
	}
	b.counts = append(b.counts, uint16(len(members)))
	return nil
}

// Encode returns the member table of ix, checked against it as
// DecodeMembers checks it.
func (b *MembersBuilder) Encode(ctx context.Context, ix *Index) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(membersMagic)
	var h [40]byte
	le.PutUint32(h[0:], MembersVersion)
	copy(h[8:24], ix.ID())
	le.PutUint32(h[24:], uint32(len(b.counts)))
	le.PutUint32(h[28:], uint32(len(b.recs)/memberRecordLen))
	le.PutUint32(h[32:], uint32(len(b.exts)))
	var ext bytes.Buffer
	for _, e := range b.exts {
		if len(e) > 1<<16-1 {
			return nil, fmt.Errorf("chunkindex: member table: extension of %d bytes", len(e))
		}
		ext.Write(le.AppendUint16(nil, uint16(len(e))))
		ext.WriteString(e)
	}
	le.PutUint32(h[36:], uint32(ext.Len()))
	buf.Write(h[:])
	buf.Write(ext.Bytes())
	for _, c := range b.counts {
		buf.Write(le.AppendUint16(nil, c))
	}
	buf.Write(b.recs)
	buf.Write(le.AppendUint32(nil, crc32.Checksum(buf.Bytes(), castagnoli)))
	out := buf.Bytes()
	if _, err := DecodeMembers(ctx, out, ix); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeMembers decodes a member table and checks it against ix, the
// index it must describe (docs/format.md §5.3): errors wrap ErrCorrupt,
// ErrTruncated or ErrVersion as the index's do. On a partial index the
// sample ranges are read chunk by chunk (Index.Samples).
func DecodeMembers(ctx context.Context, b []byte, ix *Index) (*Members, error) {
	corrupt := func(format string, a ...any) error {
		return fmt.Errorf("chunkindex: member table: %w: %s", ErrCorrupt, fmt.Sprintf(format, a...))
	}
	if !strings.HasPrefix(membersMagic, string(b[:min(len(b), 8)])) {
		return nil, corrupt("not a Brand member table")
	}
	if len(b) < membersHeaderLen {
		return nil, fmt.Errorf("chunkindex: member table: %w: %d bytes, the header needs %d", ErrTruncated, len(b), membersHeaderLen)
	}
	switch v := le.Uint32(b[8:]); {
	case v == 0:
		return nil, corrupt("version 0")
	case v != MembersVersion:
		return nil, fmt.Errorf("chunkindex: member table: %w %d (this reader knows %d)", ErrVersion, v, MembersVersion)
	}
	if f := le.Uint32(b[12:]); f != 0 {
		return nil, fmt.Errorf("chunkindex: member table: %w: flags %#x", ErrVersion, f)
	}
	id := string(b[16:32])
	n, m, e, x := uint64(le.Uint32(b[32:])), uint64(le.Uint32(b[36:])), uint64(le.Uint32(b[40:])), uint64(le.Uint32(b[44:]))
	// Sizes are checked against the length before anything is allocated.
	need := uint64(membersHeaderLen) + x + 2*n + memberRecordLen*m + 4
	if uint64(len(b)) < need {
		return nil, fmt.Errorf("chunkindex: member table: %w: %d bytes, the header says %d", ErrTruncated, len(b), need)
	}
	if uint64(len(b)) > need {
		return nil, corrupt("%d bytes after the trailer", uint64(len(b))-need)
	}
	if got, want := crc32.Checksum(b[:need-4], castagnoli), le.Uint32(b[need-4:]); got != want {
		return nil, corrupt("checksum %08x, trailer says %08x", got, want)
	}
	if id != ix.ID() {
		return nil, corrupt("it describes index %s, not %s (written before the dataset was re-indexed?)", id, ix.ID())
	}
	if n != uint64(ix.NumSamples()) {
		return nil, corrupt("%d samples, the index has %d", n, ix.NumSamples())
	}
	if e > x/2 || e > m {
		return nil, corrupt("%d extensions in %d bytes for %d members", e, x, m)
	}
	out := &Members{id: id, exts: make([]string, 0, e), starts: make([]uint32, n+1), recs: b[membersHeaderLen+x+2*n : need-4]}
	p := b[membersHeaderLen : membersHeaderLen+x]
	seen := map[string]bool{}
	for range e {
		if len(p) < 2 || len(p) < 2+int(le.Uint16(p)) {
			return nil, corrupt("extension table overruns its %d bytes", x)
		}
		s := string(p[2 : 2+le.Uint16(p)])
		p = p[2+len(s):]
		if seen[s] || strings.ContainsAny(s, "/\x00") {
			return nil, corrupt("extension %q repeated or invalid", s)
		}
		seen[s] = true
		out.exts = append(out.exts, s)
	}
	if len(p) != 0 {
		return nil, corrupt("%d bytes left in the extension table", len(p))
	}
	counts := b[membersHeaderLen+x : membersHeaderLen+x+2*n]
	var total uint64
	for i := range n {
		c := le.Uint16(counts[2*i:])
		if c == 0 {
			return nil, corrupt("sample %d has no members", i)
		}
		total += uint64(c)
		out.starts[i+1] = uint32(total)
	}
	if total != m {
		return nil, corrupt("member counts add up to %d, the header says %d", total, m)
	}
	used := make([]bool, e)
	ids := make([]int, 0, 256)
	for c := range ix.NumChunks() {
		first, cnt := ix.ChunkRange(c)
		ids = ids[:0]
		for i := first; i < first+cnt; i++ {
			ids = append(ids, i)
		}
		smp, err := ix.Samples(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("chunkindex: member table: reading the index's samples: %w", err)
		}
		for k, s := range smp {
			if err := out.checkSample(first+k, s.Length, used); err != nil {
				return nil, corrupt("%v", err)
			}
		}
	}
	for i, u := range used {
		if !u {
			return nil, corrupt("extension %q is used by no member", out.exts[i])
		}
	}
	return out, nil
}

// checkSample checks sample id's members against its range's length:
// data on block boundaries, ascending, inside the range, extensions
// distinct and in the table.
func (m *Members) checkSample(id int, length int64, used []bool) error {
	end := int64(0)
	base := int(m.starts[id])
	for j := range m.Count(id) {
		r := m.recs[(base+j)*memberRecordLen:]
		x := le.Uint32(r)
		if int(x) >= len(m.exts) {
			return fmt.Errorf("sample %d member %d: extension %d of %d", id, j, x, len(m.exts))
		}
		used[x] = true
		off, size := int64(le.Uint32(r[4:])), int64(le.Uint32(r[8:]))
		if off%BlockSize != 0 || off < end+BlockSize || off+roundBlock(size) > length {
			return fmt.Errorf("sample %d member %d: data at %d+%d in a range of %d after %d", id, j, off, size, length, end)
		}
		end = off + roundBlock(size)
		for k := range j {
			if le.Uint32(m.recs[(base+k)*memberRecordLen:]) == x {
				return fmt.Errorf("sample %d: extension %q twice", id, m.exts[x])
			}
		}
	}
	return nil
}
