package client

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/brandgw/brand/internal/codec/ustar"
)

// Sample is one training sample: the tar members that share a key.
type Sample struct {
	// Key is the WebDataset key: the member path up to the first '.' of its
	// base name, so "train/n01/x.JPEG" has key "train/n01/x".
	Key string
	// Files maps each extension (the rest of the base name after that first
	// '.', such as "JPEG" or "seg.png") to the member's contents.
	Files map[string][]byte
	// Dataset is, in a mixture's batch (Options.Job.Mix), the component
	// dataset the sample comes from (Brand-Mix-Components); keys are
	// unique only within a dataset, so Dataset and Key name the sample.
	// It is "" in a batch of one dataset and in what DecodeSamples,
	// DecodeTar and Client.Sample return.
	Dataset string
}

// DecodeSamples reads a WebDataset-style tar stream (a batch, a sample or a
// whole chunk) and groups consecutive members by key, keeping the stream's
// order. A member whose extension the current sample already has starts a
// new sample even if the key repeats, so two adjacent samples with the same
// key stay two samples. Directories and other non-regular members are
// skipped, as WebDataset does.
func DecodeSamples(r io.Reader) ([]Sample, error) {
	var g grouper
	err := g.decode(tar.NewReader(r), nil, func(tr *tar.Reader, h *tar.Header) ([]byte, error) {
		return readMember(tr, h.Size)
	})
	return g.out, err
}

// DecodeTar decodes a whole tar held in memory, grouping members into
// samples exactly as DecodeSamples does, without copying: the Files of the
// returned samples are slices of b (with their capacity cut at their end,
// so appending to one never writes into another). Any of them keeps all of
// b from being garbage collected; copy a file to keep it on its own.
//
// Plain headers — a regular file's ustar or GNU header with no extension
// header before it, which is what brand pack writes for names that fit a
// ustar header — are read in place (internal/codec/ustar's Plain); from
// the first other header on, the rest goes through archive/tar. Both give the same samples and the same
// errors (FuzzDecodeTar).
func DecodeTar(b []byte) ([]Sample, error) {
	var g grouper
	err := g.decodeTar(b)
	return g.out, err
}

// decodeTar is DecodeTar into g.
func (g *grouper) decodeTar(b []byte) error {
	off, done, err := g.plain(b)
	if done || err != nil {
		return err
	}
	br := bytes.NewReader(b)
	_, _ = br.Seek(int64(off), io.SeekStart) // off is within b: cannot fail
	pos := func() int64 { return int64(len(b) - br.Len()) }
	return g.decode(tar.NewReader(br), pos, func(tr *tar.Reader, h *tar.Header) ([]byte, error) {
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

// grouper groups regular tar members into samples.
type grouper struct {
	out     []Sample
	members int // headers read so far, to number members in errors
	// keep asks for every regular member in kept as well, with where it
	// ends, so that a batch can be split again by its manifest
	// (splitByManifest).
	keep bool
	kept []member
}

// plain reads b's members from the start for as long as their headers are
// plain (ustar.Plain). It returns the offset of the first header it did not
// read, or done when it reached the end of the archive. An error is one of
// grouping, which archive/tar would meet in the same member.
func (g *grouper) plain(b []byte) (off int, done bool, err error) {
	for {
		rest := b[off:]
		switch {
		case len(rest) == 0:
			return off, true, nil // archive/tar takes a clean end for one too
		case len(rest) < 2*ustar.BlockSize:
			return off, false, nil
		case ustar.IsZero(rest[:ustar.BlockSize]):
			if ustar.IsZero(rest[ustar.BlockSize : 2*ustar.BlockSize]) {
				return off, true, nil // end of archive
			}
			return off, false, nil
		}
		name, size, ok := ustar.Plain((*[ustar.BlockSize]byte)(rest))
		if !ok || size > int64(len(rest)-ustar.BlockSize) {
			return off, false, nil
		}
		end := ustar.BlockSize + int(size)
		next := end + int(-size&(ustar.BlockSize-1))
		if next > len(rest) {
			// The member's padding is cut off: archive/tar reports that
			// at the next header.
			return off, false, nil
		}
		key, ext, err := g.split(name)
		if err != nil {
			return off, false, err
		}
		off += next
		g.add(key, ext, rest[ustar.BlockSize:end:end], int64(off))
	}
}

// decode walks tr's regular members and groups them into samples; data
// returns a member's contents. pos, which only g.keep needs, is the
// offset in the archive that tr has read to: after Next, the member's
// first data byte, as archive/tar reads nothing ahead.
func (g *grouper) decode(tr *tar.Reader, pos func() int64, data func(*tar.Reader, *tar.Header) ([]byte, error)) error {
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("client: tar member %d: %w", g.members, err)
		}
		// archive/tar reports the old '\x00' regular-file flag as TypeReg.
		if h.Typeflag != tar.TypeReg {
			g.members++
			continue
		}
		key, ext, err := g.split(h.Name)
		if err != nil {
			return err
		}
		end := int64(-1) // unknown: the stored bytes of a sparse member are not h.Size
		if g.keep && !sparse(h) {
			end = pos() + h.Size + -h.Size&(ustar.BlockSize-1)
		}
		b, err := data(tr, h)
		if err != nil {
			return fmt.Errorf("client: tar member %d %q: %w", g.members, h.Name, err)
		}
		g.add(key, ext, b, end)
	}
}

// split splits the name of the next member, a regular file, into its
// sample key and extension.
func (g *grouper) split(name string) (key, ext string, err error) {
	key, ext = splitKey(name)
	if key == "" || strings.HasSuffix(key, "/") {
		// A base name starting with '.' has no key stem to group by.
		return "", "", fmt.Errorf("client: tar member %d %q has no sample key", g.members, name)
	}
	return key, ext, nil
}

// add adds the next member, a regular file ending (padding included) at
// offset end of the archive, to the current sample, or starts a new one
// when the key changes or the extension repeats.
func (g *grouper) add(key, ext string, data []byte, end int64) {
	g.members++
	if g.keep {
		g.kept = append(g.kept, member{key: key, ext: ext, data: data, end: end})
	}
	if n := len(g.out); n == 0 || g.out[n-1].Key != key || hasExt(g.out[n-1], ext) {
		g.out = append(g.out, Sample{Key: key, Files: make(map[string][]byte, 2)})
	}
	g.out[len(g.out)-1].Files[ext] = data
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
