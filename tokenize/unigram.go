package tokenize

import (
	"fmt"
	"math"
	"sync"
)

// unigram is the reference's unigram model (unigram_model.cc) as its
// default encoder runs it (EncodeOptimized): the segmentation of the
// normalized text whose pieces' scores sum highest, found by one forward
// pass over byte positions keeping the best path ending at each, then a
// walk back. Its arithmetic is the reference's, float for float: a
// piece's score is widened to double and added to the float best score
// of where it starts, compared in double with the float held, and stored
// as a float; an unknown character's penalty is added in float. Ties keep
// the path found first. Equal IDs on near-ties depend on it.
type unigram struct {
	trie     *byteTrie // NORMAL, USER_DEFINED and UNUSED pieces
	types    []int8    // per ID
	scores   []float32 // per ID
	unk      int32
	maxScore float32   // the user-defined symbols' bonus per byte
	unkScore float32   // min score of a NORMAL piece minus kUnkPenalty
	scratch  sync.Pool // *unigramScratch
}

// bestPath is the reference's BestPathNode.
type bestPath struct {
	score float32
	start int32 // -1: no path ends here yet
	id    int32
}

const (
	unkPenalty = float32(10) // kUnkPenalty
	// maxPooledScratch bounds the scratch kept between calls, in bytes
	// of normalized text.
	maxPooledScratch = 1 << 16
)

// newUnigram makes the model; its trie also serves as the normalizer's
// matcher of user-defined symbols (unigram.trie, unigram.types).
func newUnigram(pieces []piece, unk int32) (*unigram, error) {
	u := &unigram{
		types:  make([]int8, len(pieces)),
		scores: make([]float32, len(pieces)),
		unk:    unk,
		// The reference starts from FLT_MAX and FLT_MIN (the smallest
		// positive normal float, not the most negative one) and so do we:
		// with all scores negative, user-defined symbols score about -0.1.
		maxScore: math.Float32frombits(0x00800000),
		unkScore: math.MaxFloat32,
	}
	var keys []string
	var ids []int32
	for i, p := range pieces {
		u.types[i], u.scores[i] = p.typ, p.score
		switch p.typ {
		case pieceNormal:
			u.unkScore = min(u.unkScore, p.score)
			u.maxScore = max(u.maxScore, p.score)
			fallthrough
		case pieceUserDefined, pieceUnused:
			keys = append(keys, p.s)
			ids = append(ids, int32(i))
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: a unigram model without a normal, user-defined or unused piece", ErrNotModel)
	}
	u.unkScore = float32(u.unkScore - unkPenalty)
	u.trie = newByteTrie(keys, ids)
	return u, nil
}

// unigramScratch is one call's working memory, pooled.
type unigramScratch struct {
	best []bestPath
	ends []int32
}

// encode passes the segmentation of the normalized text s to out, piece
// by piece in order.
func (u *unigram) encode(s []byte, out *sink) {
	n := len(s)
	sc, _ := u.scratch.Get().(*unigramScratch)
	if sc == nil {
		sc = &unigramScratch{}
	}
	if cap(sc.best) < n+1 {
		sc.best = make([]bestPath, n+1)
	}
	best := sc.best[:n+1]
	for i := range best {
		best[i] = bestPath{start: -1, id: -1}
	}
	for start := 0; start < n; {
		till := best[start].score
		mblen := min(oneCharLen(s[start]), n-start)
		single := false
		node := int32(0)
		for k := start; k < n; k++ {
			if node = u.trie.child(node, s[k]); node < 0 {
				break
			}
			id := u.trie.id[node]
			if id < 0 || u.types[id] == pieceUnused {
				continue
			}
			length := k + 1 - start
			var score float64
			if u.types[id] == pieceUserDefined {
				score = float64(float32(float32(length)*u.maxScore)) - 0.1
			} else {
				score = float64(u.scores[id])
			}
			cand := score + float64(till)
			if t := &best[k+1]; t.start == -1 || cand > float64(t.score) {
				*t = bestPath{score: float32(cand), start: int32(start), id: id}
			}
			if length == mblen {
				single = true
			}
		}
		if !single {
			cand := float32(u.unkScore + till)
			if t := &best[start+mblen]; t.start == -1 || cand > t.score {
				*t = bestPath{score: cand, start: int32(start), id: u.unk}
			}
		}
		start += mblen
	}
	// Walk back from the end; every position the walk reaches was reached
	// forward (each character has a piece or an unknown of its own).
	ends := sc.ends[:0]
	for end := n; end > 0; end = int(best[end].start) {
		ends = append(ends, int32(end))
	}
	for i := len(ends) - 1; i >= 0; i-- {
		end := int(ends[i])
		out.add(s[best[end].start:end], best[end].id)
	}
	if cap(sc.best) <= maxPooledScratch {
		sc.ends = ends[:0]
		u.scratch.Put(sc)
	}
}

// oneCharLen is the reference's OneCharLen: a UTF-8 sequence's length
// from its first byte alone.
func oneCharLen(b byte) int {
	return int("\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x02\x02\x03\x04"[b>>4])
}
