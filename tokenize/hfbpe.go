package tokenize

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ByteLevelBPE is the kind of a Hugging Face tokenizer.json of byte-level
// BPE (Llama 3, Qwen 2 and 3, GPT-2, GPT-NeoX, OLMo, DeepSeek).
const ByteLevelBPE Algorithm = 100

// byteBPE is a tokenizer.json's encoder: the reference's
// Tokenizer::encode without its post-processor (tokenizer/mod.rs):
//
//  1. the added tokens whose normalized is false are found in the text;
//  2. the text between them is normalized, and the added tokens whose
//     normalized is true are found in it;
//  3. the text between those is pre-tokenized: the Split and Digits
//     steps, then ByteLevel (a prefix space, GPT-2's split), after
//     which each piece is a word of bytes;
//  4. each word is merged by BPE over the byte-level alphabet.
type byteBPE struct {
	// vocab maps a token's bytes (its characters read back through the
	// byte-level alphabet) to its ID: a word is looked up by its bytes.
	vocab map[string]int32
	// byteID is the ID of each byte's character; -1 where the vocabulary
	// lacks it (the reference drops the byte, or writes unk).
	byteID       [256]int32
	merges       map[uint64]bpeMerge // pair (left<<32 | right) → rank and merged ID
	ignoreMerges bool
	unk          int32 // -1: none
	fuseUnk      bool
	forms        []norm.Form
	raw, normed  *addedSet
	steps        []preStep
	bl           byteLevel
	words        *wordCache
	scratch      sync.Pool // *bpeScratch
}

type bpeMerge struct {
	rank uint32
	id   int32
}

// byteAlphabet is GPT-2's bytes_to_unicode: the printable bytes stand for
// themselves, the others for the characters from U+0100 on, in order.
var byteAlphabet = func() (t [256]rune) {
	n := rune(0)
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			t[b] = rune(b)
		} else {
			t[b] = 256 + n
			n++
		}
	}
	return t
}()

// alphabetByte inverts byteAlphabet.
func alphabetByte(r rune) (byte, bool) {
	switch {
	case r >= '!' && r <= '~' || r >= 0xA1 && r <= 0xAC || r >= 0xAE && r <= 0xFF:
		return byte(r), true
	case r >= 256 && r < 256+68:
		return byteAlphabetInverse[r-256], true
	}
	return 0, false
}

var byteAlphabetInverse = func() (t [68]byte) {
	for b, r := range byteAlphabet {
		if r >= 256 {
			t[r-256] = byte(b)
		}
	}
	return t
}()

// tokenBytes reads a vocabulary token back to the bytes it stands for;
// ok is false for a token with a character outside the alphabet (which
// no word can reach).
func tokenBytes(tok string) (string, bool) {
	var b strings.Builder
	b.Grow(len(tok))
	for _, r := range tok {
		c, ok := alphabetByte(r)
		if !ok {
			return "", false
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// loadTokenizerJSON is Load's tokenizer.json.
func loadTokenizerJSON(data []byte, fingerprint string) (*Model, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: tokenizer.json: not UTF-8", ErrNotModel)
	}
	f, err := parseTokenizerJSON(data)
	if err != nil {
		return nil, err
	}
	m := f.model
	switch {
	case m.typ != "BPE":
		return nil, fmt.Errorf("%w: tokenizer.json: model.type %q (this package encodes \"BPE\")", ErrUnsupported, m.typ)
	case !m.sawVocab || !m.sawMerges || m.vocab == nil:
		return nil, fmt.Errorf("%w: tokenizer.json: model.vocab or model.merges missing", ErrNotModel)
	case m.byteFallback:
		return nil, fmt.Errorf("%w: tokenizer.json: model.byte_fallback true (a byte-level model has no byte pieces)", ErrUnsupported)
	case m.dropout != nil && *m.dropout != 0:
		return nil, fmt.Errorf("%w: tokenizer.json: model.dropout %v (BPE dropout is random)", ErrUnsupported, *m.dropout)
	case m.prefix != nil && *m.prefix != "":
		return nil, fmt.Errorf("%w: tokenizer.json: model.continuing_subword_prefix %q", ErrUnsupported, *m.prefix)
	case m.suffix != nil && *m.suffix != "":
		return nil, fmt.Errorf("%w: tokenizer.json: model.end_of_word_suffix %q", ErrUnsupported, *m.suffix)
	}
	e := &byteBPE{vocab: make(map[string]int32, len(m.vocab)), unk: -1, fuseUnk: m.fuseUnk, ignoreMerges: m.ignoreMerges}
	if m.unk != nil {
		id, ok := m.vocab[*m.unk]
		if !ok {
			// The reference fails on the first unknown character instead.
			return nil, fmt.Errorf("%w: tokenizer.json: model.unk_token %q is not in model.vocab", ErrNotModel, *m.unk)
		}
		e.unk = id
	}
	maxID := int32(-1)
	for tok, id := range m.vocab {
		maxID = max(maxID, id)
		if b, ok := tokenBytes(tok); ok {
			e.vocab[b] = id
		}
	}
	for b, r := range byteAlphabet {
		e.byteID[b] = -1
		if id, ok := m.vocab[string(r)]; ok {
			e.byteID[b] = id
		}
	}
	e.merges = make(map[uint64]bpeMerge, len(m.merges))
	for i, p := range m.merges {
		a, ok1 := m.vocab[p[0]]
		b, ok2 := m.vocab[p[1]]
		id, ok3 := m.vocab[p[0]+p[1]]
		if !ok1 || !ok2 || !ok3 {
			return nil, fmt.Errorf("%w: tokenizer.json: model.merges[%d] (%q %q) names a token not in model.vocab", ErrNotModel, i, p[0], p[1])
		}
		// A pair merged twice has the later rank, as the reference's map
		// keeps the last.
		e.merges[uint64(uint32(a))<<32|uint64(uint32(b))] = bpeMerge{rank: uint32(i), id: id}
	}
	if err := parseNormalizer(f.normalizer, "normalizer", &e.forms); err != nil {
		return nil, err
	}
	if e.steps, e.bl, err = parsePreTokenizer(f.preTokenizer); err != nil {
		return nil, err
	}
	var addedMax int32
	if e.raw, e.normed, addedMax, err = buildAddedTokens(f.added, m.vocab, e.forms); err != nil {
		return nil, err
	}
	e.words = newWordCache()
	return &Model{algorithm: ByteLevelBPE, file: "tokenizer.json", vocab: int(max(maxID, addedMax)) + 1, fingerprint: fingerprint,
		special: Special{Unk: e.unk, BOS: -1, EOS: -1, Pad: -1}, enc: e}, nil
}

func (e *byteBPE) appendIDs(dst []int32, text []byte) ([]int32, error) {
	var s string
	if utf8.Valid(text) {
		s = string(text)
	} else {
		s = string(appendValidUTF8(make([]byte, 0, len(text)+len(text)/2), text))
	}
	sc, _ := e.scratch.Get().(*bpeScratch)
	if sc == nil {
		sc = new(bpeScratch)
	}
	sc.out = dst
	var err error
	e.raw.split(s, func(piece string, id int32) {
		if id >= 0 {
			sc.out = append(sc.out, id)
			return
		}
		e.normed.split(normalize(e.forms, piece), func(piece string, id int32) {
			if id >= 0 {
				sc.out = append(sc.out, id)
				return
			}
			if err == nil {
				err = e.preTokenize(piece, 0, sc)
			}
		})
	})
	out := sc.out
	sc.out = nil
	if cap(sc.syms) <= maxPooledScratch {
		e.scratch.Put(sc)
	}
	if err != nil {
		return dst, err
	}
	return out, nil
}

// preTokenize passes s through the pre-tokenizer's steps from step on,
// then ByteLevel, then merges each word.
func (e *byteBPE) preTokenize(s string, step int, sc *bpeScratch) error {
	if step < len(e.steps) {
		var err error
		serr := e.steps[step].split(s, func(p string) {
			if err == nil {
				err = e.preTokenize(p, step+1, sc)
			}
		})
		if serr != nil {
			return serr
		}
		return err
	}
	if e.bl.addPrefixSpace && !strings.HasPrefix(s, " ") {
		s = " " + s
	}
	if e.bl.regex == nil {
		e.word(s, sc)
		return nil
	}
	return e.bl.regex.split(s, func(w string) { e.word(w, sc) })
}

// word appends the IDs of one pre-tokenized word (its bytes). Words
// repeat (Zipf), so their IDs are cached.
func (e *byteBPE) word(w string, sc *bpeScratch) {
	if e.ignoreMerges {
		if id, ok := e.vocab[w]; ok {
			sc.out = append(sc.out, id)
			return
		}
	}
	if len(w) > maxCachedWord {
		sc.out = e.merge(w, sc, sc.out)
		return
	}
	if ids, ok := e.words.getString(w); ok {
		sc.out = append(sc.out, ids...)
		return
	}
	n := len(sc.out)
	sc.out = e.merge(w, sc, sc.out)
	e.words.putString(w, append([]int32(nil), sc.out[n:]...))
}

// bpeScratch is one call's working memory, pooled per model.
type bpeScratch struct {
	out  []int32
	syms []bpeSymbol
	heap []bpeCandidate
}

type bpeSymbol struct {
	id         int32
	prev, next int32 // -1: none
	gone       bool
}

type bpeCandidate struct {
	rank uint32
	pos  int32
	id   int32
}

func (a bpeCandidate) before(b bpeCandidate) bool {
	return a.rank < b.rank || a.rank == b.rank && a.pos < b.pos
}

// merge is the reference's merge_word and Word::merge_all: the word's
// bytes as symbols (a byte outside the vocabulary dropped, or unk), then
// a queue of candidate merges by (rank, position), each taken if its
// pair is still there and still merges to the same token, the pairs it
// makes with its neighbours queued. The queue and its staleness test are
// the reference's, not the textbook loop's (lowest rank, leftmost):
// they differ where two pairs merge to one token.
func (e *byteBPE) merge(w string, sc *bpeScratch, out []int32) []int32 {
	syms := sc.syms[:0]
	add := func(id int32) {
		syms = append(syms, bpeSymbol{id: id, prev: int32(len(syms) - 1), next: -1})
		if len(syms) > 1 {
			syms[len(syms)-2].next = int32(len(syms) - 1)
		}
	}
	pendingUnk := false
	for i := 0; i < len(w); i++ {
		id := e.byteID[w[i]]
		if id >= 0 {
			if pendingUnk {
				add(e.unk)
				pendingUnk = false
			}
			add(id)
			continue
		}
		if e.unk < 0 {
			continue
		}
		if pendingUnk && !e.fuseUnk {
			add(e.unk)
		}
		pendingUnk = true
	}
	if pendingUnk {
		add(e.unk)
	}
	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if m, ok := e.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h = heapPush(h, bpeCandidate{rank: m.rank, pos: int32(i), id: m.id})
		}
	}
	for len(h) > 0 {
		var top bpeCandidate
		top, h = heapPop(h)
		s := &syms[top.pos]
		if s.gone || s.next < 0 {
			continue
		}
		right := syms[s.next]
		if m, ok := e.merges[pairKey(s.id, right.id)]; !ok || m.id != top.id {
			continue // stale
		}
		s.id = top.id
		syms[s.next].gone = true
		s.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if s.prev >= 0 {
			if m, ok := e.merges[pairKey(syms[s.prev].id, s.id)]; ok {
				h = heapPush(h, bpeCandidate{rank: m.rank, pos: s.prev, id: m.id})
			}
		}
		if s.next >= 0 {
			if m, ok := e.merges[pairKey(s.id, syms[s.next].id)]; ok {
				h = heapPush(h, bpeCandidate{rank: m.rank, pos: top.pos, id: m.id})
			}
		}
	}
	for _, s := range syms {
		if !s.gone {
			out = append(out, s.id)
		}
	}
	sc.syms, sc.heap = syms, h
	return out
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func heapPush(h []bpeCandidate, c bpeCandidate) []bpeCandidate {
	h = append(h, c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func heapPop(h []bpeCandidate) (bpeCandidate, []bpeCandidate) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h[l].before(h[m]) {
			m = l
		}
		if r < n && h[r].before(h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top, h
}
