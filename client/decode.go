package client

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"strings"
)

// Sample is one training sample: the tar members that share a key.
type Sample struct {
	// Key is the WebDataset key: the member path up to the first '.' of its
	// base name, so "train/n01/x.JPEG" has key "train/n01/x".
	Key string
	// Files maps each extension (the rest of the base name after that first
	// '.', such as "JPEG" or "seg.png") to the member's contents.
	Files map[string][]byte
}

// DecodeSamples reads a WebDataset-style tar stream (a batch, a sample or a
// whole chunk) and groups consecutive members by key, keeping the stream's
// order. A member whose extension the current sample already has starts a
// new sample even if the key repeats, so two adjacent samples with the same
// key stay two samples. Directories and other non-regular members are
// skipped, as WebDataset does.
func DecodeSamples(r io.Reader) ([]Sample, error) {
	return decode(tar.NewReader(r), func(tr *tar.Reader, h *tar.Header) ([]byte, error) {
		return readMember(tr, h.Size)
	})
}

// DecodeTar decodes a whole tar held in memory, grouping members into
// samples exactly as DecodeSamples does, without copying: the Files of the
// returned samples are slices of b (with their capacity cut at their end,
// so appending to one never writes into another). Any of them keeps all of
// b from being garbage collected; copy a file to keep it on its own.
func DecodeTar(b []byte) ([]Sample, error) {
	br := bytes.NewReader(b)
	return decode(tar.NewReader(br), func(tr *tar.Reader, h *tar.Header) ([]byte, error) {
		if sparse(h) {
			// The stored bytes are not the file's: let the tar reader
			// expand them.
			return readMember(tr, h.Size)
		}
		// After Next the reader stands at the member's first byte.
		off := int64(len(b) - br.Len())
		if h.Size > int64(br.Len()) {
			return nil, io.ErrUnexpectedEOF
		}
		return b[off : off+h.Size : off+h.Size], nil
	})
}

// decode walks tr's regular members and groups them into samples; data
// returns a member's contents.
func decode(tr *tar.Reader, data func(*tar.Reader, *tar.Header) ([]byte, error)) ([]Sample, error) {
	var out []Sample
	for i := 0; ; i++ {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("client: tar member %d: %w", i, err)
		}
		// archive/tar reports the old '\x00' regular-file flag as TypeReg.
		if h.Typeflag != tar.TypeReg {
			continue
		}
		key, ext := splitKey(h.Name)
		if key == "" || strings.HasSuffix(key, "/") {
			// A base name starting with '.' has no key stem to group by.
			return out, fmt.Errorf("client: tar member %d %q has no sample key", i, h.Name)
		}
		b, err := data(tr, h)
		if err != nil {
			return out, fmt.Errorf("client: tar member %d %q: %w", i, h.Name, err)
		}
		if n := len(out); n == 0 || out[n-1].Key != key || hasExt(out[n-1], ext) {
			out = append(out, Sample{Key: key, Files: make(map[string][]byte, 2)})
		}
		out[len(out)-1].Files[ext] = b
	}
}

// sparse reports whether a regular member is stored in a GNU sparse
// format, whose stored bytes are not the file's contents.
func sparse(h *tar.Header) bool {
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

func hasExt(s Sample, ext string) bool {
	_, ok := s.Files[ext]
	return ok
}

// maxPrealloc bounds the buffer allocated from a header's size field alone,
// so a corrupt header cannot make the decoder allocate gigabytes before the
// data fails to arrive; larger members grow as their bytes are read.
const maxPrealloc = 64 << 20

func readMember(r io.Reader, size int64) ([]byte, error) {
	if size > maxPrealloc {
		return io.ReadAll(r)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// splitKey splits a member name into WebDataset key and extension at the
// first '.' of the base name; a name without one is all key. It matches
// chunkindex.SplitKey, which the gateway uses to group members.
func splitKey(name string) (key, ext string) {
	base := strings.LastIndexByte(name, '/') + 1
	if dot := strings.IndexByte(name[base:], '.'); dot >= 0 {
		return name[:base+dot], name[base+dot+1:]
	}
	return name, ""
}
