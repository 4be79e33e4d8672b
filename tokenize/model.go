package tokenize

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/brandgw/brand/internal/errkind"
)

// Errors, for errors.Is.
var (
	// ErrNotModel: the bytes are not a tokenizer the reference would
	// load (empty, truncated, another file or protobuf, or a model its
	// own loader refuses: no <unk>, a duplicate piece, a merge of tokens
	// not in the vocabulary, ...).
	ErrNotModel = errkind.New(errkind.Internal, "tokenize: not a tokenizer model")
	// ErrTooLarge: the model is larger than MaxModelBytes or has more
	// than MaxPieces pieces.
	ErrTooLarge = errkind.New(errkind.Internal, "tokenize: model too large")
	// ErrUnsupported: a SentencePiece model, tokenizer.json or tiktoken
	// rank file of a kind this package refuses (see the package doc); the
	// message names the field.
	ErrUnsupported = errkind.New(errkind.Internal, "tokenize: unsupported tokenizer")
	// ErrPattern: a tokenizer.json's pre-tokenizer pattern, one matched
	// by regexp2 (see the package doc), failed on a text: it searched
	// longer than its bound, or matched the empty string.
	ErrPattern = errkind.New(errkind.Internal, "tokenize: a pre-tokenizer pattern failed")
	// ErrTextTooLong: a text longer than MaxTextBytes.
	ErrTextTooLong = errkind.New(errkind.Internal, "tokenize: text too long")
	// ErrDamagedModel: the model's normalization map points outside
	// itself, found while encoding a text that reaches the damage (the
	// reference would read outside its buffer).
	ErrDamagedModel = errkind.New(errkind.Internal, "tokenize: damaged SentencePiece model")
)

// Bounds.
const (
	// MaxModelBytes bounds a model file. The largest models in use (a
	// vocabulary of 262,144 pieces) are under 5 MB.
	MaxModelBytes = 64 << 20
	// MaxPieces bounds a vocabulary, counted before anything is
	// allocated for it.
	MaxPieces = 1 << 19
	// MaxPieceBytes bounds the bytes of a model's pieces, all together
	// (a vocabulary of 262,144 pieces has about 2 MB of them): the
	// tries built of them cost about 30 bytes a byte.
	MaxPieceBytes = 8 << 20
	// MaxTextBytes bounds one text (one document): encoding holds a few
	// times its size, up to 100 times for BPE on text without spaces
	// (see Costs in the package doc).
	MaxTextBytes = 8 << 20
)

// Algorithm is a model's segmentation algorithm (TrainerSpec.model_type).
type Algorithm int

// The algorithms this package encodes.
const (
	Unigram Algorithm = modelTypeUnigram
	BPE     Algorithm = modelTypeBPE
)

func (k Algorithm) String() string {
	switch k {
	case Unigram:
		return "unigram"
	case BPE:
		return "bpe"
	case modelTypeWord:
		return "word"
	case modelTypeChar:
		return "char"
	case ByteLevelBPE:
		return "byte-level-bpe"
	case TiktokenBPE:
		return "tiktoken-bpe"
	}
	return fmt.Sprintf("Algorithm(%d)", int(k))
}

// Special holds a model's special IDs as the reference reports them
// (unk_id(), bos_id(), eos_id(), pad_id()): -1 for none. Encode never
// writes BOS, EOS or pad; a caller adds them.
type Special struct {
	Unk, BOS, EOS, Pad int32
}

// Model is a loaded tokenizer: a SentencePiece model, a Hugging Face
// tokenizer.json of byte-level BPE, or a tiktoken encoding. It is immutable and safe for
// concurrent use: one Model serves any number of goroutines.
type Model struct {
	algorithm   Algorithm
	file        string // File's answer
	vocab       int
	special     Special
	fingerprint string
	enc         encoder
}

// encoder is a kind of tokenizer behind Model: the seam each kind of
// file loads into, so that Model's callers hold one type whatever file
// they were given.
type encoder interface {
	// appendIDs appends the IDs of text (at most MaxTextBytes) to dst; on
	// error dst is returned unchanged. Safe for concurrent use.
	appendIDs(dst []int32, text []byte) ([]int32, error)
}

// pieceModel is a SentencePiece model's encoder.
type pieceModel struct {
	norm         *normalizer
	uni          *unigram // kind Unigram
	bpe          *bpe     // kind BPE
	unk          int32
	byteFallback bool
	byteIDs      [256]int32 // byte fallback: the <0xXX> pieces
	bufs         sync.Pool  // *[]byte, normalized text
}

// Load reads a tokenizer file: a SentencePiece model (a .model file's
// bytes, the ModelProto protobuf), a Hugging Face tokenizer.json of
// byte-level BPE, or a tiktoken encoding's rank file (a .tiktoken file),
// told apart by their content (fileKinds). It refuses,
// with an error wrapping ErrNotModel, ErrTooLarge or ErrUnsupported,
// anything the reference would not load and what this package does not
// encode; a file that is none of these kinds is refused naming them and
// saying what it looks like (JSON null, a PNG, an HTML page, a Git LFS
// pointer, ...). data is not retained.
func Load(data []byte) (*Model, error) {
	switch {
	case len(data) == 0:
		return nil, fmt.Errorf("%w: the file is empty", ErrNotModel)
	case len(data) > MaxModelBytes:
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, len(data), MaxModelBytes)
	}
	sum := sha256.Sum256(data)
	fingerprint := hex.EncodeToString(sum[:8])
	for _, k := range fileKinds {
		if k.is(data) {
			return k.load(data, fingerprint)
		}
	}
	m, err := loadSentencePiece(data, fingerprint)
	if errors.Is(err, ErrNotModel) && !startsLikeSentencePiece(data) {
		return nil, notATokenizer(data, err)
	}
	return m, err
}

// fileKinds are the files Load tells apart by their first bytes, tried
// in order; a file none of them claims is read as a SentencePiece model.
// A new kind of tokenizer file is one entry here and an encoder.
var fileKinds = [...]struct {
	is   func(data []byte) bool
	load func(data []byte, fingerprint string) (*Model, error)
}{
	{looksLikeJSON, loadTokenizerJSON},
	{looksLikeTiktoken, loadTiktoken},
}

func loadSentencePiece(data []byte, fingerprint string) (*Model, error) {
	s := string(data) // the one copy the pieces' strings are slices of
	mp, err := parseModelProto(data, s, MaxPieces)
	if err == nil && len(mp.pieces) == 0 {
		err = fmt.Errorf("%w: no pieces", ErrNotModel)
	}
	if err != nil {
		return nil, err
	}
	return newModel(mp, fingerprint)
}

// looksLikeJSON reports whether data starts, after whitespace, like a
// JSON object or array: a tokenizer.json. A SentencePiece model cannot:
// its first byte is a protobuf tag, and '{' and '[' are tags of the
// deprecated group wire type, which no field of a ModelProto has.
func looksLikeJSON(data []byte) bool {
	t := bytes.TrimLeft(data[:min(len(data), 64)], " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

func newModel(mp *modelProto, fingerprint string) (*Model, error) {
	kind := Algorithm(mp.trainer.modelType)
	if kind != Unigram && kind != BPE {
		return nil, fmt.Errorf("%w: model type %s (only unigram and BPE are encoded)", ErrUnsupported, kind)
	}
	m := &pieceModel{byteFallback: mp.trainer.byteFallback}
	if err := m.checkPieces(mp); err != nil {
		return nil, err
	}
	var userKeys []string
	var userIDs []int32
	for i, p := range mp.pieces {
		if p.typ == pieceUserDefined {
			userKeys = append(userKeys, p.s)
			userIDs = append(userIDs, int32(i))
		}
	}
	// One trie of the user-defined symbols serves the normalizer and the
	// model: the unigram model's own trie of all segmenting pieces, or
	// one of them alone.
	var user *byteTrie
	var userTypes []int8
	var err error
	switch kind {
	case Unigram:
		if m.uni, err = newUnigram(mp.pieces, m.unk); err != nil {
			return nil, err
		}
		if len(userKeys) > 0 {
			user, userTypes = m.uni.trie, m.uni.types
		}
	case BPE:
		if len(userKeys) > 0 {
			user = newByteTrie(userKeys, userIDs)
		}
	}
	if m.norm, err = newNormalizer(mp.norm, mp.trainer.suffix, user, userTypes, userKeys); err != nil {
		return nil, err
	}
	if kind == BPE {
		if err := checkBPE(m.norm); err != nil {
			return nil, err
		}
		if m.bpe, err = newBPE(mp.pieces, m.byteFallback, user); err != nil {
			return nil, err
		}
	}
	special := Special{
		Unk: m.specialID(mp, mp.trainer.unkPiece, "<unk>", pieceUnknown),
		BOS: m.specialID(mp, mp.trainer.bosPiece, "<s>", pieceControl),
		EOS: m.specialID(mp, mp.trainer.eosPiece, "</s>", pieceControl),
		Pad: m.specialID(mp, mp.trainer.padPiece, "<pad>", pieceControl),
	}
	return &Model{algorithm: kind, file: "SentencePiece", vocab: len(mp.pieces), fingerprint: fingerprint, special: special, enc: m}, nil
}

// checkPieces is the reference's InitializePieces: no empty piece, no
// piece twice among the segmenting pieces (normal, user-defined, unused)
// nor among the others (unknown, control, byte), exactly one unknown
// piece, byte pieces named <0x00> … <0xFF> and only with byte fallback,
// where all 256 must be. It also refuses a NUL byte in a segmenting
// piece (the reference's tries read their keys up to a NUL, so would
// segment with another piece than the model names).
func (m *pieceModel) checkPieces(mp *modelProto) error {
	m.unk = -1
	var haveByte [256]bool
	total := 0
	for i, p := range mp.pieces {
		if p.s == "" {
			return fmt.Errorf("%w: piece %d is empty", ErrNotModel, i)
		}
		if total += len(p.s); total > MaxPieceBytes {
			return fmt.Errorf("%w: more than %d bytes of pieces", ErrTooLarge, MaxPieceBytes)
		}
		switch p.typ {
		case pieceUnknown:
			if m.unk >= 0 {
				return fmt.Errorf("%w: a second unknown piece (%d, %q; the first is %d)", ErrNotModel, i, p.s, m.unk)
			}
			m.unk = int32(i)
		case pieceByte:
			if !mp.trainer.byteFallback {
				return fmt.Errorf("%w: byte piece %d (%q) in a model without byte fallback", ErrNotModel, i, p.s)
			}
			b, ok := bytePiece(p.s)
			if !ok {
				return fmt.Errorf("%w: byte piece %d (%q) is not <0xXX>", ErrNotModel, i, p.s)
			}
			haveByte[b] = true
			m.byteIDs[b] = int32(i) // the last wins, as the reference's reserved map would not allow two anyway
		case pieceNormal, pieceUserDefined, pieceUnused:
			if strings.IndexByte(p.s, 0) >= 0 {
				return fmt.Errorf("%w: piece %d (%q) contains a NUL byte", ErrUnsupported, i, p.s)
			}
		}
	}
	if m.unk < 0 {
		return fmt.Errorf("%w: no unknown piece (<unk>)", ErrNotModel)
	}
	if mp.trainer.byteFallback {
		for b, ok := range haveByte {
			if !ok {
				return fmt.Errorf("%w: byte fallback without the byte piece <0x%02X>", ErrNotModel, b)
			}
		}
	}
	// Duplicates: sort the IDs by (reserved, piece); equal neighbours are
	// the same piece twice in one of the reference's two maps.
	reserved := func(t int8) bool { return t == pieceUnknown || t == pieceControl || t == pieceByte }
	order := make([]int32, len(mp.pieces))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		pa, pb := mp.pieces[a], mp.pieces[b]
		if ra, rb := reserved(pa.typ), reserved(pb.typ); ra != rb {
			if ra {
				return 1
			}
			return -1
		}
		return strings.Compare(pa.s, pb.s)
	})
	for k := 1; k < len(order); k++ {
		a, b := mp.pieces[order[k-1]], mp.pieces[order[k]]
		if a.s == b.s && reserved(a.typ) == reserved(b.typ) {
			return fmt.Errorf("%w: piece %q is defined twice (%d and %d)", ErrNotModel, a.s, min(order[k-1], order[k]), max(order[k-1], order[k]))
		}
	}
	return nil
}

// checkBPE refuses what the library cannot merge as the reference does.
func checkBPE(norm *normalizer) error {
	if !norm.escape {
		// The library writes U+2581 for every space it is given.
		return fmt.Errorf("%w: a BPE model that does not escape whitespace", ErrUnsupported)
	}
	if !utf8.Valid(norm.strs) {
		// The library splits by valid UTF-8, the reference by first bytes.
		return fmt.Errorf("%w: a BPE model whose normalization map writes invalid UTF-8", ErrUnsupported)
	}
	return nil
}

// bytePiece parses a byte piece's name, exactly <0xXX> with upper-case
// hex digits (the reference's PieceToByte knows only those 256 names).
func bytePiece(s string) (byte, bool) {
	const hexDigits = "0123456789ABCDEF"
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	hi, lo := strings.IndexByte(hexDigits, s[3]), strings.IndexByte(hexDigits, s[4])
	if hi < 0 || lo < 0 {
		return 0, false
	}
	return byte(hi<<4 | lo), true
}

// specialID is the reference's unk_id()/bos_id()/...: the ID of the piece
// the trainer spec names (or the default name), looked up among the
// unknown, control and byte pieces first, then the others, else unk; -1
// unless that piece has the type the role needs.
func (m *pieceModel) specialID(mp *modelProto, name, def string, want int8) int32 {
	if name == "" {
		name = def
	}
	id := int32(-1)
	for i, p := range mp.pieces {
		if p.s != name {
			continue
		}
		if p.typ == pieceUnknown || p.typ == pieceControl || p.typ == pieceByte {
			id = int32(i)
			break
		}
		if id < 0 {
			id = int32(i)
		}
	}
	if id < 0 {
		id = m.unk
	}
	if mp.pieces[id].typ != want {
		return -1
	}
	return id
}

// File names the kind of file the model was loaded from:
// "SentencePiece", "tokenizer.json", or a tiktoken encoding's rank file
// by its name ("cl100k_base.tiktoken").
func (m *Model) File() string { return m.file }

// Algorithm returns the model's algorithm.
func (m *Model) Algorithm() Algorithm { return m.algorithm }

// VocabSize returns the number of pieces (a tokenizer.json: its largest
// ID, added tokens included, plus one): every ID is in [0, VocabSize).
func (m *Model) VocabSize() int { return m.vocab }

// Special returns the model's special IDs.
func (m *Model) Special() Special { return m.special }

// Fingerprint names the model: the first 16 hex digits of the SHA-256 of
// its file's bytes (`sha256sum tokenizer.model | cut -c1-16`). The same
// bytes give the same IDs for the same text, on every node and after a
// restart, so a job or an ETag that names the fingerprint names the IDs.
func (m *Model) Fingerprint() string { return m.fingerprint }

// Encode returns the IDs of text, exactly those the reference returns
// for the same bytes: SentencePieceProcessor.Encode (Python:
// sp.encode(text)) for a SentencePiece model, Tokenizer.encode without
// its post-processor (Python: tok.encode(text,
// add_special_tokens=False).ids) for a tokenizer.json, encode_ordinary
// (Python: enc.encode_ordinary(text)) for a tiktoken encoding. No BOS or
// EOS is added. Invalid UTF-8 is encoded by the package doc's rule for each.
func (m *Model) Encode(text []byte) ([]int32, error) {
	return m.Append(nil, text)
}

// Append appends the IDs of text to dst (see Encode). On error dst is
// returned unchanged.
func (m *Model) Append(dst []int32, text []byte) ([]int32, error) {
	if len(text) > MaxTextBytes {
		return dst, fmt.Errorf("%w: %d bytes, more than %d", ErrTextTooLong, len(text), MaxTextBytes)
	}
	return m.enc.appendIDs(dst, text)
}

func (m *pieceModel) appendIDs(dst []int32, text []byte) ([]int32, error) {
	bp, _ := m.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	norm, err := m.norm.normalize((*bp)[:0], text)
	if err != nil {
		return dst, err
	}
	out := sink{ids: dst, m: m}
	switch {
	case len(norm) == 0:
	case m.uni != nil:
		m.uni.encode(norm, &out)
	default:
		m.bpe.encode(norm, &out)
	}
	if cap(norm) <= maxPooledScratch*4 {
		*bp = norm[:0]
		m.bufs.Put(bp)
	}
	return out.ids, nil
}

// sink is the reference's PopulateSentencePieceText for IDs: an unknown
// piece becomes its bytes' pieces with byte fallback, and a run of
// unknown pieces one unknown ID without.
type sink struct {
	ids     []int32
	m       *pieceModel
	prevUnk bool
}

// add takes a piece of the model's segmentation: its text and ID.
func (s *sink) add(w []byte, id int32) {
	unk := id == s.m.unk
	switch {
	case unk && s.m.byteFallback:
		for _, b := range w {
			s.ids = append(s.ids, s.m.byteIDs[b])
		}
	case unk && s.prevUnk:
	default:
		s.ids = append(s.ids, id)
	}
	s.prevUnk = unk
}

// addID takes an ID after byte fallback (the BPE library's output).
func (s *sink) addID(id int32) {
	unk := id == s.m.unk
	if !(unk && s.prevUnk) {
		s.ids = append(s.ids, id)
	}
	s.prevUnk = unk
}
