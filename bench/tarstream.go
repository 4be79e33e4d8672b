package bench

import (
	"fmt"
	"io"

	"github.com/brandgw/brand/client"
)

// decodeBody reads a whole WebDataset tar body (size bytes expected) and
// hands its samples to emit in order. It decodes exactly as Brand's client
// decodes a batch — one buffer per body, read with a few large reads, and
// client.DecodeTar over it — so that every configuration pays the same
// client-side cost per byte and per sample, and the comparison is of how
// the bytes arrive, not of two decoders.
func decodeBody(r io.Reader, size int64, emit func(*client.Sample) error) error {
	b, err := readFull(r, size)
	if err != nil {
		return err
	}
	samples, err := client.DecodeTar(b)
	if err != nil {
		return fmt.Errorf("decoding %d bytes: %w", len(b), err)
	}
	for i := range samples {
		if err := emit(&samples[i]); err != nil {
			return err
		}
	}
	return nil
}
