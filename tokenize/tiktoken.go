package tokenize

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// TiktokenBPE is the kind of a tiktoken encoding's rank file
// (cl100k_base.tiktoken, o200k_base.tiktoken, ...): byte-level BPE by the
// ranks of merged tokens.
const TiktokenBPE Algorithm = 101

// tiktokenEncoding is a named encoding of tiktoken (its
// tiktoken_ext/openai_public.py): the rank file, known by its SHA-256
// (the expected_hash tiktoken checks a download against), and what the
// file does not hold, the pre-tokenizer's pattern and the special tokens.
type tiktokenEncoding struct {
	name    string
	sha256  string
	pattern string
	special []tiktokenSpecial // <|endoftext|> first
}

type tiktokenSpecial struct {
	content string
	id      int32
}

// tiktokenEncodings are the encodings Load knows by their rank files.
// p50k_edit reads p50k_base's file and adds special tokens that
// encoding never writes (see the package doc): the file loads as
// p50k_base.
var tiktokenEncodings = [...]tiktokenEncoding{
	{name: "r50k_base", sha256: "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
		pattern: gpt2Pattern, special: []tiktokenSpecial{{"<|endoftext|>", 50256}}},
	{name: "p50k_base", sha256: "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
		pattern: gpt2Pattern, special: []tiktokenSpecial{{"<|endoftext|>", 50256}}},
	{name: "cl100k_base", sha256: "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
		pattern: llama3Pattern, special: []tiktokenSpecial{{"<|endoftext|>", 100257}, {"<|fim_prefix|>", 100258},
			{"<|fim_middle|>", 100259}, {"<|fim_suffix|>", 100260}, {"<|endofprompt|>", 100276}}},
	{name: "o200k_base", sha256: "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
		pattern: o200kPattern, special: []tiktokenSpecial{{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}},
}

// looksLikeTiktoken reports whether data's first line is a rank file's:
// base64, a space, a decimal rank (the line's first 64 bytes, where it is
// longer; a CR before its end allowed, so that such a file is refused as
// a rank file). A SentencePiece model cannot start so: its first byte is
// the tag of its pieces (0x0A), and a base64 character would be a field
// no ModelProto has.
func looksLikeTiktoken(data []byte) bool {
	head := data[:min(len(data), 64)]
	line, _, ended := bytes.Cut(head, []byte("\n"))
	cut := !ended && len(head) == 64 // the line goes on past head
	tok, rank, spaced := bytes.Cut(line, []byte(" "))
	rank = bytes.TrimSuffix(rank, []byte("\r"))
	switch {
	case len(tok) == 0 || len(bytes.Trim(tok, base64Chars)) != 0:
		return false
	case !spaced:
		return cut
	}
	return (len(rank) > 0 || cut) && len(bytes.Trim(rank, "0123456789")) == 0
}

const base64Chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="

// maxTiktokenToken bounds one token's bytes: BPE's pieces' bound (the
// named encodings' longest token has 128).
const maxTiktokenToken = maxBPEPiece

// parseTiktoken reads a rank file, one "TOKEN RANK" line a token
// (load_tiktoken_bpe's format: the token's bytes in standard base64 with
// padding, its rank in decimal), bounded as a tokenizer.json is: at most
// MaxPieces tokens of maxTiktokenToken bytes each and MaxPieceBytes in
// all, ranks below MaxPieces. A token or a rank twice is refused, as
// tiktoken's CoreBPE refuses an encoder and a decoder of different sizes.
// It returns each token's rank by its bytes, and the largest rank.
func parseTiktoken(data []byte) (map[string]int32, int32, error) {
	type entry struct {
		start, end int // in buf
		rank       int32
	}
	var entries []entry
	var buf []byte
	seen := make([]uint64, MaxPieces/64)
	maxRank := int32(-1)
	maxB64 := base64.StdEncoding.EncodedLen(maxTiktokenToken)
	for n, rest := 1, data; len(rest) > 0; n++ {
		line, after, _ := bytes.Cut(rest, []byte("\n"))
		rest = after
		b64, num, ok := bytes.Cut(line, []byte(" "))
		if !ok || len(b64) == 0 {
			return nil, 0, fmt.Errorf("%w: tiktoken: line %d is not \"TOKEN RANK\"", ErrNotModel, n)
		}
		if len(b64) > maxB64 {
			return nil, 0, fmt.Errorf("%w: tiktoken: line %d: a token of more than %d bytes", ErrTooLarge, n, maxTiktokenToken)
		}
		rank, ok := parseRank(num)
		if !ok {
			return nil, 0, fmt.Errorf("%w: tiktoken: line %d: rank %.20q is not a decimal number below %d", ErrNotModel, n, num, MaxPieces)
		}
		if seen[rank/64]&(1<<(rank%64)) != 0 {
			return nil, 0, fmt.Errorf("%w: tiktoken: line %d: rank %d twice", ErrNotModel, n, rank)
		}
		seen[rank/64] |= 1 << (rank % 64)
		start := len(buf)
		if len(buf)+len(b64) > MaxPieceBytes+maxB64 {
			return nil, 0, fmt.Errorf("%w: tiktoken: more than %d bytes of tokens", ErrTooLarge, MaxPieceBytes)
		}
		buf = append(buf, make([]byte, base64.StdEncoding.DecodedLen(len(b64)))...)
		k, err := base64.StdEncoding.Strict().Decode(buf[start:], b64)
		if err != nil || k == 0 {
			return nil, 0, fmt.Errorf("%w: tiktoken: line %d: token %.20q is not base64", ErrNotModel, n, b64)
		}
		buf = buf[:start+k]
		if k > maxTiktokenToken {
			return nil, 0, fmt.Errorf("%w: tiktoken: line %d: a token of more than %d bytes", ErrTooLarge, n, maxTiktokenToken)
		}
		if len(buf) > MaxPieceBytes {
			return nil, 0, fmt.Errorf("%w: tiktoken: more than %d bytes of tokens", ErrTooLarge, MaxPieceBytes)
		}
		entries = append(entries, entry{start, start + k, rank})
		maxRank = max(maxRank, rank)
	}
	if len(entries) == 0 {
		return nil, 0, fmt.Errorf("%w: tiktoken: no tokens", ErrNotModel)
	}
	all := string(buf) // the one copy the tokens are slices of
	ranks := make(map[string]int32, len(entries))
	for _, e := range entries {
		tok := all[e.start:e.end]
		if r, dup := ranks[tok]; dup {
			return nil, 0, fmt.Errorf("%w: tiktoken: token %q twice (ranks %d and %d)", ErrNotModel, tok, r, e.rank)
		}
		ranks[tok] = e.rank
	}
	return ranks, maxRank, nil
}

// parseRank reads a rank: decimal digits without a sign or a leading
// zero, below MaxPieces.
func parseRank(b []byte) (int32, bool) {
	if len(b) == 0 || len(b) > 7 || len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	r := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		r = r*10 + int(c-'0')
	}
	return int32(r), r < MaxPieces
}

// loadTiktoken is Load's rank file. The file names no encoding, so its
// SHA-256 does: a file of no named encoding is refused, since its
// pattern and special tokens are not known.
func loadTiktoken(data []byte, fingerprint string) (*Model, error) {
	ranks, maxRank, err := parseTiktoken(data)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	var enc *tiktokenEncoding
	for i := range tiktokenEncodings {
		if tiktokenEncodings[i].sha256 == hex.EncodeToString(sum[:]) {
			enc = &tiktokenEncodings[i]
		}
	}
	if enc == nil {
		names := make([]string, len(tiktokenEncodings))
		for i, e := range tiktokenEncodings {
			names[i] = e.name
		}
		return nil, fmt.Errorf("%w: tiktoken: a rank file of no named encoding (SHA-256 %x; this package knows %s by their files, as tiktoken publishes them)",
			ErrUnsupported, sum, strings.Join(names, ", "))
	}
	e, err := newTiktokenBPE(ranks, enc.pattern)
	if err != nil {
		return nil, err
	}
	vocab := maxRank
	for _, s := range enc.special {
		vocab = max(vocab, s.id)
	}
	return &Model{algorithm: TiktokenBPE, file: enc.name + ".tiktoken", vocab: int(vocab) + 1, fingerprint: fingerprint,
		special: Special{Unk: -1, BOS: -1, EOS: enc.special[0].id, Pad: -1}, enc: e}, nil
}

// newTiktokenBPE makes tiktoken's encoder (CoreBPE::encode_ordinary) a
// tokenizer.json's: the pattern's matches are the words, and the text
// between them is dropped (a Split, Removed, inverted: tiktoken's
// find_iter); a word that is a token is that token (ignore_merges); else
// its bytes are merged. tiktoken merges the adjacent pair whose joined
// bytes have the lowest rank, leftmost on a tie, and every part is a
// token; byteBPE's queue merges the pair of lowest rank, leftmost on a
// tie. So the merges are derived: each way to cut a token in two tokens
// is a pair, ranked by the token. Every byte must be a token, as tiktoken
// indexes its ranks by a lone byte that merged with nothing.
func newTiktokenBPE(ranks map[string]int32, pattern string) (*byteBPE, error) {
	e := &byteBPE{vocab: ranks, unk: -1, ignoreMerges: true}
	for b := range 256 {
		id, ok := ranks[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("%w: tiktoken: the byte 0x%02X is not a token", ErrNotModel, b)
		}
		e.byteID[b] = id
	}
	pairs := 0
	for tok := range ranks {
		for k := 1; k < len(tok); k++ {
			if _, ok := ranks[tok[:k]]; ok {
				if _, ok := ranks[tok[k:]]; ok {
					pairs++
				}
			}
		}
	}
	e.merges = make(map[uint64]bpeMerge, pairs)
	for tok, r := range ranks {
		for k := 1; k < len(tok); k++ {
			a, ok1 := ranks[tok[:k]]
			b, ok2 := ranks[tok[k:]]
			if ok1 && ok2 {
				e.merges[pairKey(a, b)] = bpeMerge{rank: uint32(r), id: r}
			}
		}
	}
	split := &regexSplit{behavior: "Removed", invert: true}
	if split.match = knownPatterns[pattern]; split.match == nil {
		var err error
		if split.re, err = compileFallback(pattern, "tiktoken pattern"); err != nil {
			return nil, err
		}
	}
	e.steps = []preStep{split}
	e.words = newWordCache()
	return e, nil
}
