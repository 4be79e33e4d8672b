package bench

import (
	"archive/tar"
	"fmt"
	"io"

	"github.com/brandgw/brand/chunkindex"
)

// sample is one decoded sample: the members sharing a WebDataset key.
type sample struct {
	key   string
	exts  []string
	files [][]byte
}

func (s *sample) has(ext string) bool {
	for _, e := range s.exts {
		if e == ext {
			return true
		}
	}
	return false
}

// decodeStream reads a WebDataset tar stream member by member, groups
// consecutive members by key as client.DecodeSamples does, and hands each
// sample to emit as soon as it is complete. Streamed shards and chunks pay
// the same decoding cost as Brand's client, one sample at a time rather
// than a whole body at once.
func decodeStream(r io.Reader, emit func(*sample) error) error {
	tr := tar.NewReader(r)
	var cur *sample
	for i := 0; ; i++ {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("tar member %d: %w", i, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		key, ext := chunkindex.SplitKey(h.Name)
		data, err := readFull(tr, h.Size)
		if err != nil {
			return fmt.Errorf("tar member %d %q: %w", i, h.Name, err)
		}
		if cur == nil || cur.key != key || cur.has(ext) {
			if cur != nil {
				if err := emit(cur); err != nil {
					return err
				}
			}
			cur = &sample{key: key}
		}
		cur.exts = append(cur.exts, ext)
		cur.files = append(cur.files, data)
	}
	if cur != nil {
		return emit(cur)
	}
	return nil
}
