// Package megatrontest writes Megatron-LM indexed datasets (a prefix's
// .bin and .idx) as megatron/core/datasets/indexed_dataset.py's builder
// writes them, one sequence a document, for tests of the packages that
// serve them. It is test support: no server links it.
package megatrontest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/s3backend"
)

// codes are the builder's dtype codes of the integer dtypes.
var codes = map[string]struct {
	code byte
	size int
}{
	"uint8": {1, 1}, "int8": {2, 1}, "int16": {3, 2}, "int32": {4, 4}, "int64": {5, 8}, "uint16": {8, 2},
}

// Files returns the .bin and .idx of documents docs (each its token IDs)
// in dtype dtype ("uint16", "int32", ...). It panics on an unknown dtype:
// a test's mistake.
func Files(dtype string, docs [][]int64) (bin, idx []byte) {
	c, ok := codes[dtype]
	if !ok {
		panic(fmt.Sprintf("megatrontest: dtype %q", dtype))
	}
	le := binary.LittleEndian
	for _, d := range docs {
		for _, t := range d {
			switch c.size {
			case 1:
				bin = append(bin, byte(t))
			case 2:
				bin = le.AppendUint16(bin, uint16(t))
			case 4:
				bin = le.AppendUint32(bin, uint32(t))
			case 8:
				bin = le.AppendUint64(bin, uint64(t))
			}
		}
	}
	idx = append(idx, "MMIDIDX\x00\x00"...)
	idx = le.AppendUint64(idx, 1)
	idx = append(idx, c.code)
	idx = le.AppendUint64(idx, uint64(len(docs)))
	idx = le.AppendUint64(idx, uint64(len(docs)+1))
	for _, d := range docs {
		idx = le.AppendUint32(idx, uint32(len(d)))
	}
	var p int64
	for _, d := range docs {
		idx = le.AppendUint64(idx, uint64(p))
		p += int64(len(d) * c.size)
	}
	for i := range len(docs) + 1 {
		idx = le.AppendUint64(idx, uint64(i))
	}
	return bin, idx
}

// Corpus returns n documents of a length mix like a language corpus's:
// mostly short, some of a few hundred tokens, a tail past maxLen/2, each
// token a distinct function of (document, position) below vocab so that a
// test can tell every token apart: token t of document d is
// (d·7919 + t) mod vocab. Lengths are drawn from seed.
func Corpus(n, maxLen, vocab int, seed uint64) [][]int64 {
	r := rand.New(rand.NewPCG(seed, 0x6d65676174726f6e))
	docs := make([][]int64, n)
	for d := range docs {
		var l int
		switch x := r.IntN(100); {
		case x < 70:
			l = 1 + r.IntN(max(1, maxLen/16))
		case x < 95:
			l = 1 + r.IntN(max(1, maxLen/3))
		default:
			l = maxLen/2 + r.IntN(max(1, maxLen/2))
		}
		docs[d] = make([]int64, l)
		for t := range l {
			docs[d][t] = int64((d*7919 + t) % vocab)
		}
	}
	return docs
}

// LogNormal returns n documents whose lengths are log-normal around
// median tokens with σ sigma (a web-and-books mix at median 500, σ 1.2:
// about 12 % of documents past 2,048 tokens, 1 % past 8,192, the longest
// near 10^5; capped at 131,072), tokens as Corpus's. Lengths are drawn
// from seed.
func LogNormal(n int, median, sigma float64, vocab int, seed uint64) [][]int64 {
	r := rand.New(rand.NewPCG(seed, 0x6c6f676e6f726d))
	docs := make([][]int64, n)
	for d := range docs {
		l := min(max(int(math.Round(median*math.Exp(sigma*r.NormFloat64()))), 1), 131072)
		docs[d] = make([]int64, l)
		for t := range l {
			docs[d][t] = int64((d*7919 + t) % vocab)
		}
	}
	return docs
}

// Store writes corpus, parts of documents, as the Megatron files
// data/p<part>_text_document.{bin,idx} of dtype dtype into a local store
// in dir and indexes them in place with opts, whose Formats name the
// Megatron format (this package cannot: that package's tests import it):
// a token dataset as a test serves it, written in one place for the
// tests of the gateway and of the client.
func Store(dir, dtype string, corpus [][][]int64, opts dataset.InPlaceOptions) (*s3backend.Local, error) {
	st, err := s3backend.NewLocal(dir)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	for p, docs := range corpus {
		bin, idx := Files(dtype, docs)
		for name, b := range map[string][]byte{fmt.Sprintf("data/p%d_text_document.bin", p): bin, fmt.Sprintf("data/p%d_text_document.idx", p): idx} {
			if _, err := st.Put(ctx, name, bytes.NewReader(b), int64(len(b))); err != nil {
				return nil, err
			}
		}
	}
	if _, err := dataset.IndexInPlace(ctx, st, st, opts); err != nil {
		return nil, err
	}
	return st, nil
}
