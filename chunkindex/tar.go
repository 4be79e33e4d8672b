package chunkindex

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// BlockSize is the tar block size. Every sample range starts and ends on a
// block boundary, because tar headers and member data are block-aligned.
const BlockSize = 512

// EndOfArchive is the tar end-of-archive marker: two zero blocks. Writing
// sample ranges back to back followed by EndOfArchive yields a valid tar,
// which is how the gateway serves a batch without re-encoding anything.
// It is a read-only value; never modify it.
var EndOfArchive [2 * BlockSize]byte

// castagnoli is the CRC32C table used for every checksum in the format.
// crc32.MakeTable returns a shared, read-only table for Castagnoli.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// TarSample is one sample found by ScanTar: the run of consecutive regular
// members sharing a key.
type TarSample struct {
	Key string
	// Offset is where the first header block of the sample's first member
	// starts (including pax 'x' and GNU 'L'/'K' blocks that belong to it).
	Offset int64
	// Length runs to the end of the last member's block padding; it is always
	// a positive multiple of BlockSize.
	Length int64
	// CRC is the CRC32C (Castagnoli) of the Length bytes at Offset.
	CRC uint32
	// Members lists the member names in archive order.
	Members []string
	// Files describes the same members for the member table: extension,
	// where the data starts in the sample's range, size, modification
	// time and the data's CRC32C.
	Files []MemberInfo
}

// ScanTar reads a tar stream written by any POSIX tar writer (Go
// archive/tar, GNU tar, Python tarfile; ustar, pax or GNU formats) and calls
// fn, in archive order, once per sample with the sample's byte range and
// CRC32C. It returns the number of bytes read: the whole stream, including
// the end-of-archive marker and any record padding after it, which for an
// object in a store is the object size.
//
// Directory entries and pax global headers ('g') belong to no sample: they
// end the sample before them and are left out of every range. Any other
// non-regular member (hard or symbolic link, device, FIFO, GNU sparse or
// volume entries) and any member whose base name starts with '.' is an error
// wrapping ErrUnsupportedMember, because serving it as part of a sample would
// silently hand a training job something other than the bytes it names.
// A key that reappears after a different key (or after a directory entry),
// or a member name repeated within a sample, is an error wrapping
// ErrDuplicateKey.
//
// An error returned by fn stops the scan and is returned unchanged. On any
// error, size is the number of bytes read so far.
func ScanTar(r io.Reader, fn func(TarSample) error) (size int64, err error) {
	sr := &scanReader{r: bufio.NewReaderSize(r, 64<<10)}
	tr := tar.NewReader(sr)
	var (
		open *TarSample           // the sample being extended, if any
		seen = map[string]int64{} // key -> offset of its sample
	)
	// closeAt ends the open sample at end, where the current entry's headers
	// begin; sr.crc then covers exactly the sample's bytes.
	closeAt := func(end int64) error {
		if open == nil {
			return nil
		}
		s := *open
		open = nil
		s.Length = end - s.Offset
		s.CRC = sr.crc
		return fn(s)
	}

	// pending is the member whose data is being read; its CRC is known
	// once the next header is reached.
	pending := false
	finish := func() {
		if pending && open != nil {
			open.Files[len(open.Files)-1].CRC = sr.mcrc
		}
		pending = false
	}
	for {
		hdr, err := tr.Next()
		finish()
		if errors.Is(err, io.EOF) {
			break
		}
		// A name that escapes the archive root is harmless here: nothing is
		// extracted to a file system. The header is still valid.
		if err != nil && !(errors.Is(err, tar.ErrInsecurePath) && hdr != nil) {
			return sr.pos, fmt.Errorf("chunkindex: reading tar entry at offset %d: %w", sr.boundary, err)
		}
		start, dataStart := sr.boundary, sr.pos
		if !sr.past || dataStart-start < BlockSize {
			return sr.pos, errBlockPositions(hdr.Name, start, dataStart)
		}

		switch hdr.Typeflag {
		case tar.TypeReg:
			if isSparse(hdr) {
				return sr.pos, fmt.Errorf("chunkindex: %w %q at offset %d: sparse file", ErrUnsupportedMember, hdr.Name, start)
			}
			if dataStart%BlockSize != 0 {
				return sr.pos, errBlockPositions(hdr.Name, start, dataStart)
			}
			if p := memberNameProblem(hdr.Name); p != "" {
				return sr.pos, fmt.Errorf("chunkindex: %w %q at offset %d: %s", ErrUnsupportedMember, hdr.Name, start, p)
			}
			if hdr.Size > math.MaxInt64-dataStart-BlockSize {
				return sr.pos, fmt.Errorf("chunkindex: tar entry %q at offset %d: size %d too large", hdr.Name, start, hdr.Size)
			}
			key, ext := SplitKey(hdr.Name)
			if open != nil && open.Key == key {
				// WebDataset readers refuse a repeated member too.
				if slices.Contains(open.Members, hdr.Name) {
					return sr.pos, fmt.Errorf("chunkindex: %w %q: member %q at offset %d appears twice in the sample",
						ErrDuplicateKey, key, hdr.Name, start)
				}
				open.Members = append(open.Members, hdr.Name)
				sr.crc = crc32.Update(sr.crc, castagnoli, sr.header)
			} else {
				if err := closeAt(start); err != nil {
					return sr.pos, err
				}
				if prev, dup := seen[key]; dup {
					return sr.pos, fmt.Errorf("chunkindex: %w %q: member %q at offset %d is not adjacent to the sample at offset %d",
						ErrDuplicateKey, key, hdr.Name, start, prev)
				}
				seen[key] = start
				open = &TarSample{Key: key, Offset: start, Members: []string{hdr.Name}}
				sr.crc = crc32.Update(0, castagnoli, sr.header)
			}
			open.Files = append(open.Files, MemberInfo{Ext: ext, DataOffset: dataStart - open.Offset, Size: hdr.Size,
				ModTime: time.Unix(hdr.ModTime.Unix(), 0).UTC()})
			sr.data(dataStart, dataStart+hdr.Size)
			pending = true
			sr.expect(dataStart + roundBlock(hdr.Size))

		case tar.TypeDir, tar.TypeXGlobalHeader:
			if err := closeAt(start); err != nil {
				return sr.pos, err
			}
			// archive/tar has read a global header's data but not its padding;
			// directories have no data.
			sr.expect(roundBlock(sr.pos))

		default:
			return sr.pos, fmt.Errorf("chunkindex: %w %q at offset %d: type %s", ErrUnsupportedMember, hdr.Name, start, typeName(hdr.Typeflag))
		}
	}

	// The archive's entries end where the end-of-archive marker (or the
	// stream) begins.
	if sr.pos < sr.boundary {
		return sr.pos, fmt.Errorf("chunkindex: tar ended at offset %d inside an entry ending at %d: %w", sr.pos, sr.boundary, io.ErrUnexpectedEOF)
	}
	if err := closeAt(sr.boundary); err != nil {
		return sr.pos, err
	}
	// Count the rest (GNU tar pads archives to a 10 KiB record) so size is
	// the object size.
	sr.drain = true
	if _, err := io.Copy(io.Discard, sr); err != nil {
		return sr.pos, fmt.Errorf("chunkindex: reading after end of archive: %w", err)
	}
	return sr.pos, nil
}

// errBlockPositions reports that archive/tar consumed bytes in a way this
// scanner does not model; ScanTar refuses rather than report a wrong range.
func errBlockPositions(name string, start, dataStart int64) error {
	return fmt.Errorf("chunkindex: tar entry %q: header at offset %d, data at %d: inconsistent block positions", name, start, dataStart)
}

// scanReader counts the bytes archive/tar reads and checksums them. Entry
// boundaries are known before the bytes after them are read (an entry's end
// follows from its header), but whether the next entry continues the open
// sample is only known once its header has been parsed. So the bytes past
// the boundary (the next entry's header blocks, at most a few MiB since
// archive/tar caps pax and GNU long-name data) are kept aside in header
// until ScanTar decides which sample they belong to.
type scanReader struct {
	r        io.Reader
	pos      int64  // bytes read so far
	boundary int64  // end of the current entry; header blocks start here
	crc      uint32 // CRC32C of the open sample's bytes before min(pos, boundary)
	header   []byte // bytes read past boundary
	past     bool   // pos has reached boundary and bytes go to header
	drain    bool   // only count
	// The data of the member being read, [from, to), and its CRC32C so far.
	from, to int64
	mcrc     uint32
}

// data records that the member's data is [from, to).
func (s *scanReader) data(from, to int64) {
	s.from, s.to, s.mcrc = from, to, 0
	s.member(s.header, s.pos-int64(len(s.header)))
}

// member adds to the member's CRC the part of b, which starts at offset
// at, inside the member's data.
func (s *scanReader) member(b []byte, at int64) {
	lo, hi := max(at, s.from), min(at+int64(len(b)), s.to)
	if lo < hi {
		s.mcrc = crc32.Update(s.mcrc, castagnoli, b[lo-at:hi-at])
	}
}

// expect records that the current entry ends at end (>= pos).
func (s *scanReader) expect(end int64) {
	s.boundary = end
	s.past = false
	s.header = s.header[:0]
}

func (s *scanReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	b := p[:n]
	if !s.drain {
		s.member(b, s.pos)
	}
	switch {
	case s.drain:
	case s.past:
		s.header = append(s.header, b...)
	case s.pos+int64(n) >= s.boundary:
		k := s.boundary - s.pos
		s.crc = crc32.Update(s.crc, castagnoli, b[:k])
		s.header = append(s.header, b[k:]...)
		s.past = true
	default:
		s.crc = crc32.Update(s.crc, castagnoli, b)
	}
	s.pos += int64(n)
	return n, err
}

// roundBlock rounds n up to a multiple of BlockSize.
func roundBlock(n int64) int64 {
	return (n + BlockSize - 1) &^ (BlockSize - 1)
}

// isSparse reports whether hdr is a GNU sparse file (old GNU or pax
// encoding), whose bytes in the archive are not its contents.
func isSparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

func typeName(flag byte) string {
	switch flag {
	case tar.TypeLink:
		return "hard link"
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "FIFO"
	case tar.TypeCont:
		return "contiguous file"
	case tar.TypeGNUSparse:
		return "GNU sparse file"
	}
	return fmt.Sprintf("%q", flag)
}
