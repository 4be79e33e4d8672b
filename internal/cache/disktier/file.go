package disktier

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"

	"github.com/brandgw/brand/internal/cache/chunkcache"
)

// A chunk file is a header naming the chunk, then the chunk's bytes:
//
//	magic "BRANDCHK", version u32, header length u32, chunk size u64,
//	dataset, object, ETag (each: length u16, bytes), CRC32C of all the
//	header before it u32
//
// little-endian. The file is named after a hash of (dataset, object, ETag)
// so that a chunk has one place in a directory; the header lets a file be
// recognised without the index, and its CRC keeps a garbled header from
// naming another chunk.
const (
	magic       = "BRANDCHK"
	fileVersion = 1
	fixedHeader = 8 + 4 + 4 + 8
	suffix      = ".chunk"
	tempMark    = ".tmp-"
	maxHeader   = fixedHeader + 4*(2+65535) + 4
)

var (
	le        = binary.LittleEndian
	castagnol = crc32.MakeTable(crc32.Castagnoli)
	errHeader = errors.New("not a chunk file of this format, or of another chunk")
	errShort  = errors.New("chunk file shorter than its chunk")
)

// fileName is where chunk k lives in a directory.
func fileName(k chunkcache.Key) string {
	h := sha256.New()
	for _, s := range keyFields(k) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16]) + suffix
}

// keyFields are the fields of k a file names: a chunk decoded with some
// of its fields (Key.Select) has a fourth, so that files of chunks read
// whole keep the names and headers they had before there were any.
func keyFields(k chunkcache.Key) []string {
	if k.Select != "" {
		return []string{k.Dataset, k.Object, k.ETag, k.Select}
	}
	return []string{k.Dataset, k.Object, k.ETag}
}

func isTemp(name string) bool { return strings.Contains(name, suffix+tempMark) }

func encodeHeader(k chunkcache.Key, size int64) []byte {
	b := make([]byte, 0, fixedHeader+8+len(k.Dataset)+len(k.Object)+len(k.ETag)+len(k.Select)+4)
	b = append(b, magic...)
	b = le.AppendUint32(b, fileVersion)
	b = le.AppendUint32(b, 0) // length, below
	b = le.AppendUint64(b, uint64(size))
	for _, s := range keyFields(k) {
		b = le.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	le.PutUint32(b[12:], uint32(len(b)+4))
	return le.AppendUint32(b, crc32.Checksum(b, castagnol))
}

// readHeader reads and checks the header at the start of f.
func readHeader(f io.ReaderAt) (k chunkcache.Key, size int64, n int, err error) {
	var fixed [fixedHeader]byte
	if _, err := f.ReadAt(fixed[:], 0); err != nil {
		return k, 0, 0, fmt.Errorf("%w: %w", errHeader, err)
	}
	n = int(le.Uint32(fixed[12:]))
	if string(fixed[:8]) != magic || le.Uint32(fixed[8:]) != fileVersion || n < fixedHeader+6+4 || n > maxHeader {
		return k, 0, 0, errHeader
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		return k, 0, 0, fmt.Errorf("%w: %w", errHeader, err)
	}
	if crc32.Checksum(b[:n-4], castagnol) != le.Uint32(b[n-4:]) {
		return k, 0, 0, fmt.Errorf("%w: header CRC32C mismatch", errHeader)
	}
	size = int64(le.Uint64(b[16:]))
	rest := b[fixedHeader : n-4]
	var fields [4]string
	i := 0
	for ; i < len(fields) && len(rest) > 0; i++ {
		if len(rest) < 2 || len(rest) < 2+int(le.Uint16(rest)) {
			return k, 0, 0, errHeader
		}
		l := int(le.Uint16(rest))
		fields[i], rest = string(rest[2:2+l]), rest[2+l:]
	}
	if i < 3 || len(rest) != 0 || size < 0 || i == 4 && fields[3] == "" {
		return k, 0, 0, errHeader
	}
	return chunkcache.Key{Dataset: fields[0], Object: fields[1], ETag: fields[2], Select: fields[3]}, size, n, nil
}

// statFile reads the header of a file found in a directory and checks that
// the file is exactly as long as it says.
func statFile(path string) (k chunkcache.Key, size int64, hdr int, info os.FileInfo, err error) {
	f, err := os.Open(path)
	if err != nil {
		return k, 0, 0, nil, err
	}
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return k, 0, 0, nil, err
	}
	if k, size, hdr, err = readHeader(f); err != nil {
		return k, 0, 0, nil, err
	}
	if info.Size() != int64(hdr)+size {
		return k, 0, 0, nil, fmt.Errorf("%w: %d bytes, the header says %d", errShort, info.Size(), int64(hdr)+size)
	}
	return k, size, hdr, info, nil
}

// readFile fills buf with the chunk in path, checking that the file names k
// and holds exactly len(buf) bytes after its header.
func readFile(path string, k chunkcache.Key, buf []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	got, size, n, err := readHeader(f)
	if err != nil {
		return err
	}
	if got != k || size != int64(len(buf)) {
		return fmt.Errorf("%w: it holds %s (%d bytes)", errHeader, got, size)
	}
	if m, err := f.ReadAt(buf, int64(n)); m < len(buf) {
		return fmt.Errorf("%w: %d of %d bytes: %w", errShort, m, len(buf), err)
	}
	var one [1]byte
	if m, _ := f.ReadAt(one[:], int64(n)+size); m != 0 {
		return fmt.Errorf("%w: the file is longer than its chunk", errHeader)
	}
	return nil
}
