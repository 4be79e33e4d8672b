package tokenize

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	sentencepiece "github.com/eliben/go-sentencepiece"
	"google.golang.org/protobuf/encoding/protowire"
)

// bpe is the reference's BPE model (bpe_model.cc): the normalized text
// split into characters and user-defined symbols, then the adjacent pair
// whose merged piece scores highest merged, leftmost first on ties, until
// no pair is a piece; user-defined symbols are never merged. The merging
// is github.com/eliben/go-sentencepiece's, which implements exactly that
// loop (its own tests compare it with the reference on Gemma's model);
// what it lacks around the loop, this package does: the normalizer, the
// bounded parsing of the model, and the merging of unknown runs.
//
// The library is given a model of its own making: the pieces, with a
// normalizer that does nothing (the text it gets is normalized already;
// it refuses the reference's defaults and ignores the character map).
// User-defined symbols are found here, not by the library: since they
// never merge, the text between two of them is merged on its own, and
// the library's matcher for them (a map per character) would cost about
// 400 bytes a byte of them. In the library's model they are control
// pieces of names no text can spell, keeping every other piece's ID:
// no merge could have made one anyway, since a merged piece that spelled
// one would start where the scan below matches that symbol (or a longer
// one) first.
type bpe struct {
	proc *sentencepiece.Processor
	user *byteTrie // the user-defined symbols; nil for none
	// userID maps a user-defined symbol's piece ID to the ID the
	// reference gives it, where a reserved piece has the same name
	// (PieceToId looks among those first).
	userID map[int32]int32
	// split: no normal piece has U+2581 except in a leading run, so no
	// merge crosses the start of a run of U+2581 that follows another
	// character, and the text is merged a word at a time, each ending
	// there: the same pieces, with memory bounded by the word instead of
	// the document, and words cached.
	split bool
	words *wordCache // where split
}

// maxBPEPiece bounds a normal piece of a BPE model: the library holds a
// buffer of the longest one for every text it merges. The trainer writes
// pieces of 16 characters at most by default.
const maxBPEPiece = 4 << 10

// newBPE makes the model; user holds its user-defined symbols.
func newBPE(pieces []piece, byteFallback bool, user *byteTrie) (*bpe, error) {
	e := &bpe{split: true, user: user, userID: make(map[int32]int32)}
	reserved := make(map[string]int32)
	for i, p := range pieces {
		if p.typ == pieceUnknown || p.typ == pieceControl || p.typ == pieceByte {
			reserved[p.s] = int32(i)
		}
	}
	lib := slices.Clone(pieces)
	for i, p := range pieces {
		switch p.typ {
		case pieceUnused:
			// The reference merges into an unused piece and then splits it
			// back (resegment); the library keeps it. No trainer writes one.
			return nil, fmt.Errorf("%w: a BPE model with an unused piece (%d, %q)", ErrUnsupported, i, p.s)
		case pieceNormal:
			if len(p.s) > maxBPEPiece {
				return nil, fmt.Errorf("%w: BPE piece %d has %d bytes, more than %d", ErrTooLarge, i, len(p.s), maxBPEPiece)
			}
			if strings.Contains(strings.TrimLeft(p.s, spaceSymbol), spaceSymbol) {
				e.split = false
			}
		case pieceUserDefined:
			if id, ok := reserved[p.s]; ok {
				e.userID[int32(i)] = id
			}
			// NUL is refused in pieces, so no text spells this name.
			lib[i] = piece{s: "\x00" + strconv.Itoa(i), typ: pieceControl}
		}
	}
	proc, err := sentencepiece.NewProcessor(bytes.NewReader(libraryModel(lib, byteFallback)))
	if err != nil {
		return nil, fmt.Errorf("%w: BPE: %v", ErrNotModel, err)
	}
	e.proc = proc
	if e.split {
		e.words = newWordCache()
	}
	return e, nil
}

// libraryModel writes the ModelProto the library is given: the pieces,
// BPE with the model's byte fallback, and a normalizer whose options are
// all set explicitly (the library dereferences them).
func libraryModel(pieces []piece, byteFallback bool) []byte {
	var b, m []byte
	for _, p := range pieces {
		m = m[:0]
		m = protowire.AppendTag(m, fieldPiece, protowire.BytesType)
		m = protowire.AppendString(m, p.s)
		m = protowire.AppendTag(m, fieldPieceScore, protowire.Fixed32Type)
		m = protowire.AppendFixed32(m, math.Float32bits(p.score))
		m = protowire.AppendTag(m, fieldPieceType, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(p.typ))
		b = protowire.AppendTag(b, fieldPieces, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	m = m[:0]
	m = protowire.AppendTag(m, fieldModelType, protowire.VarintType)
	m = protowire.AppendVarint(m, modelTypeBPE)
	m = protowire.AppendTag(m, fieldByteFallback, protowire.VarintType)
	m = protowire.AppendVarint(m, protowire.EncodeBool(byteFallback))
	b = protowire.AppendTag(b, fieldTrainerSpec, protowire.BytesType)
	b = protowire.AppendBytes(b, m)
	m = m[:0]
	m = protowire.AppendTag(m, fieldNormName, protowire.BytesType)
	m = protowire.AppendString(m, "identity")
	for _, f := range []protowire.Number{fieldAddDummyPrefix, fieldRemoveExtraWS, fieldEscapeWS} {
		m = protowire.AppendTag(m, f, protowire.VarintType)
		m = protowire.AppendVarint(m, 0)
	}
	b = protowire.AppendTag(b, fieldNormalizerSpec, protowire.BytesType)
	b = protowire.AppendBytes(b, m)
	return b
}

// encode passes the pieces of the normalized text s to out, in order.
// The library has done byte fallback already: out sees byte pieces, and
// unknown pieces only where the model has no byte fallback.
func (e *bpe) encode(s []byte, out *sink) {
	if e.user == nil {
		e.merge(s, out)
		return
	}
	// The reference's scan: at each character, the longest user-defined
	// symbol that starts there, else the character (by its first byte).
	from := 0
	for i := 0; i < len(s); {
		if l, id := e.user.longestPrefix(s[i:]); l > 0 {
			e.merge(s[from:i], out)
			if r, ok := e.userID[id]; ok {
				id = r
			}
			out.addID(id)
			i += l
			from = i
			continue
		}
		i += min(oneCharLen(s[i]), len(s)-i)
	}
	e.merge(s[from:], out)
}

// merge passes the pieces of s, which holds no user-defined symbol.
// Where words can be split, each word is merged on its own and its IDs
// kept in the word cache: text repeats its words (Zipf), and merging is
// the cost. Elsewhere s is merged whole.
func (e *bpe) merge(s []byte, out *sink) {
	if !e.split {
		if len(s) > 0 {
			for _, t := range e.proc.Encode(string(s)) {
				out.addID(int32(t.ID))
			}
		}
		return
	}
	for len(s) > 0 {
		end := nextSegmentEnd(s, 1)
		word := s[:end]
		s = s[end:]
		if len(word) > maxCachedWord {
			for _, t := range e.proc.Encode(string(word)) {
				out.addID(int32(t.ID))
			}
			continue
		}
		ids, ok := e.words.get(word)
		if !ok {
			tokens := e.proc.Encode(string(word))
			ids = make([]int32, len(tokens))
			for i, t := range tokens {
				ids[i] = int32(t.ID)
			}
			e.words.put(word, ids)
		}
		for _, id := range ids {
			out.addID(id)
		}
	}
}

// wordCache maps words to their IDs, bounded: a shard that is full is
// emptied (the frequent words come back at once). Safe for concurrent
// use; its slices are never written after they are stored.
type wordCache struct {
	seed   maphash.Seed
	shards [wordCacheShards]struct {
		mu sync.RWMutex
		m  map[string][]int32
	}
}

const (
	wordCacheShards = 64
	wordShardMax    = 1024 // words a shard holds: 65,536 in all, a few MB
	maxCachedWord   = 64   // bytes; longer words are merged every time
)

func newWordCache() *wordCache {
	c := &wordCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string][]int32)
	}
	return c
}

func (c *wordCache) get(word []byte) ([]int32, bool) {
	sh := &c.shards[maphash.Bytes(c.seed, word)%wordCacheShards]
	sh.mu.RLock()
	ids, ok := sh.m[string(word)]
	sh.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(word []byte, ids []int32) {
	sh := &c.shards[maphash.Bytes(c.seed, word)%wordCacheShards]
	sh.mu.Lock()
	if len(sh.m) >= wordShardMax {
		clear(sh.m)
	}
	sh.m[string(word)] = ids
	sh.mu.Unlock()
}

// nextSegmentEnd returns the first position at or after from where a run
// of U+2581 starts after another character, or len(s).
func nextSegmentEnd(s []byte, from int) int {
	for p := from; p < len(s); {
		i := bytes.Index(s[p:], []byte(spaceSymbol))
		if i < 0 {
			break
		}
		p += i
		if p >= len(spaceSymbol) && string(s[p-len(spaceSymbol):p]) == spaceSymbol {
			p += len(spaceSymbol) // within a run: its start was passed
			continue
		}
		return p
	}
	return len(s)
}

// getString and putString are get and put for a word held as a string;
// putString keeps a copy of it, not the text it is a slice of.
func (c *wordCache) getString(word string) ([]int32, bool) {
	sh := &c.shards[maphash.String(c.seed, word)%wordCacheShards]
	sh.mu.RLock()
	ids, ok := sh.m[word]
	sh.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) putString(word string, ids []int32) {
	sh := &c.shards[maphash.String(c.seed, word)%wordCacheShards]
	sh.mu.Lock()
	if len(sh.m) >= wordShardMax {
		clear(sh.m)
	}
	sh.m[strings.Clone(word)] = ids
	sh.mu.Unlock()
}
