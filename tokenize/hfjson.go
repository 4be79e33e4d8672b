package tokenize

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Bounds of a tokenizer.json, beside MaxModelBytes and MaxPieces (which
// bound its vocabulary, and its merges: each names a token of it).
const (
	// MaxAddedTokens bounds a tokenizer.json's added_tokens (Llama 3 has
	// 256, Qwen 3 26).
	MaxAddedTokens = 1 << 16
	// maxComponentBytes bounds the normalizer and the pre-tokenizer
	// objects, which hold a few patterns (Llama 3's: 300 bytes).
	maxComponentBytes = 64 << 10
	// maxComponents bounds the steps of a Sequence, nested ones counted.
	maxComponents = 64
)

// hfFile is what this package reads of a tokenizer.json. The decoder,
// the post-processor, truncation and padding are not read: encoding
// stops at the model's IDs, as the SentencePiece path's does (a token
// job adds EOS and padding itself).
type hfFile struct {
	sawModel     bool
	model        hfModel
	added        []hfAddedToken
	normalizer   jsontext.Value // null or absent: none
	preTokenizer jsontext.Value
}

// hfModel is the model object of a BPE tokenizer.json.
type hfModel struct {
	typ          string
	vocab        map[string]int32
	merges       [][2]string
	ignoreMerges bool
	unk          *string
	fuseUnk      bool
	byteFallback bool
	dropout      *float64
	prefix       *string // continuing_subword_prefix
	suffix       *string // end_of_word_suffix
	sawVocab     bool
	sawMerges    bool
}

// hfAddedToken is an entry of added_tokens. Its "id" is not read: the
// reference gives an added token the vocabulary's ID of its content, or
// the next free one, in order, and only warns where the file says
// another.
type hfAddedToken struct {
	Content                                         string
	SingleWord, LStrip, RStrip, Normalized, Special bool
}

// notJSON wraps a syntax error of the file as ErrNotModel.
func notJSON(err error) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrNotModel) || errors.Is(err, ErrUnsupported) {
		return err
	}
	return fmt.Errorf("%w: tokenizer.json: %v", ErrNotModel, err)
}

// parseTokenizerJSON reads a tokenizer.json a token at a time, so that
// the vocabulary and the merges are counted as they are read and a file
// past the bounds is refused before it has cost more than its size.
// Duplicate names are allowed, the last one winning, as serde's maps
// and the reference's loader do.
func parseTokenizerJSON(data []byte) (*hfFile, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true))
	if err := expectDelim(dec, '{', "the file"); err != nil {
		return nil, err
	}
	f := &hfFile{}
	for dec.PeekKind() != '}' {
		key, err := readString(dec)
		if err != nil {
			return nil, notJSON(err)
		}
		switch key {
		case "version":
			v, err := dec.ReadValue()
			if err != nil {
				return nil, notJSON(err)
			}
			if string(v) != `"1.0"` {
				return nil, fmt.Errorf("%w: tokenizer.json: version %s (the reference reads \"1.0\")", ErrNotModel, v)
			}
		case "added_tokens":
			if f.added, err = parseAddedTokens(dec); err != nil {
				return nil, err
			}
		case "normalizer":
			if f.normalizer, err = readComponent(dec, key); err != nil {
				return nil, err
			}
		case "pre_tokenizer":
			if f.preTokenizer, err = readComponent(dec, key); err != nil {
				return nil, err
			}
		case "model":
			f.sawModel = true
			if f.model, err = parseModel(dec); err != nil {
				return nil, err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return nil, notJSON(err)
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, notJSON(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, fmt.Errorf("%w: tokenizer.json: data after the object", ErrNotModel)
	}
	if !f.sawModel {
		return nil, fmt.Errorf("%w: tokenizer.json: no model", ErrNotModel)
	}
	return f, nil
}

func expectDelim(dec *jsontext.Decoder, k jsontext.Kind, what string) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return notJSON(err)
	}
	if tok.Kind() != k {
		return fmt.Errorf("%w: tokenizer.json: %s is not a JSON %s", ErrNotModel, what, map[jsontext.Kind]string{'{': "object", '[': "array"}[k])
	}
	return nil
}

func readString(dec *jsontext.Decoder) (string, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return "", err
	}
	if tok.Kind() != '"' {
		return "", fmt.Errorf("%w: tokenizer.json: a string expected, %s found", ErrNotModel, tok.Kind())
	}
	return tok.String(), nil
}

// readComponent reads the normalizer's or pre-tokenizer's value whole,
// bounded: both are a few patterns.
func readComponent(dec *jsontext.Decoder, key string) (jsontext.Value, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return nil, notJSON(err)
	}
	if len(v) > maxComponentBytes {
		return nil, fmt.Errorf("%w: tokenizer.json: %s of %d bytes, more than %d", ErrTooLarge, key, len(v), maxComponentBytes)
	}
	return bytes.Clone(v), nil
}

func parseAddedTokens(dec *jsontext.Decoder) ([]hfAddedToken, error) {
	if err := expectDelim(dec, '[', "added_tokens"); err != nil {
		return nil, err
	}
	var out []hfAddedToken
	for dec.PeekKind() != ']' {
		if len(out) == MaxAddedTokens {
			return nil, fmt.Errorf("%w: tokenizer.json: more than %d added_tokens", ErrTooLarge, MaxAddedTokens)
		}
		v, err := dec.ReadValue()
		if err != nil {
			return nil, notJSON(err)
		}
		if len(v) > maxComponentBytes {
			return nil, fmt.Errorf("%w: tokenizer.json: added_tokens[%d] of %d bytes", ErrTooLarge, len(out), len(v))
		}
		// Every field is required, as the reference's serde struct has it.
		var t struct {
			ID         *int64  `json:"id"`
			Content    *string `json:"content"`
			SingleWord *bool   `json:"single_word"`
			LStrip     *bool   `json:"lstrip"`
			RStrip     *bool   `json:"rstrip"`
			Normalized *bool   `json:"normalized"`
			Special    *bool   `json:"special"`
		}
		if err := json.Unmarshal(v, &t, jsontext.AllowDuplicateNames(true)); err != nil {
			return nil, fmt.Errorf("%w: tokenizer.json: added_tokens[%d]: %v", ErrNotModel, len(out), err)
		}
		if t.ID == nil || t.Content == nil || t.SingleWord == nil || t.LStrip == nil || t.RStrip == nil || t.Normalized == nil || t.Special == nil {
			return nil, fmt.Errorf("%w: tokenizer.json: added_tokens[%d] lacks one of id, content, single_word, lstrip, rstrip, normalized, special", ErrNotModel, len(out))
		}
		out = append(out, hfAddedToken{Content: *t.Content, SingleWord: *t.SingleWord, LStrip: *t.LStrip, RStrip: *t.RStrip, Normalized: *t.Normalized, Special: *t.Special})
	}
	_, err := dec.ReadToken()
	return out, notJSONOrNil(err)
}

func notJSONOrNil(err error) error {
	if err == nil {
		return nil
	}
	return notJSON(err)
}

// parseModel reads the model object, its vocabulary and merges counted
// against MaxPieces as they are read.
func parseModel(dec *jsontext.Decoder) (hfModel, error) {
	var m hfModel
	if err := expectDelim(dec, '{', "model"); err != nil {
		return m, err
	}
	for dec.PeekKind() != '}' {
		key, err := readString(dec)
		if err != nil {
			return m, notJSON(err)
		}
		switch key {
		case "type":
			if m.typ, err = readString(dec); err != nil {
				return m, notJSON(err)
			}
		case "vocab":
			m.sawVocab = true
			if dec.PeekKind() != '{' {
				// A unigram model's vocab is an array of [piece, score].
				m.vocab = nil
				if err := dec.SkipValue(); err != nil {
					return m, notJSON(err)
				}
				continue
			}
			if m.vocab, err = parseVocab(dec); err != nil {
				return m, err
			}
		case "merges":
			m.sawMerges = true
			if m.merges, err = parseMerges(dec); err != nil {
				return m, err
			}
		case "ignore_merges", "fuse_unk", "byte_fallback":
			v, err := dec.ReadValue()
			if err != nil {
				return m, notJSON(err)
			}
			var b bool
			if err := json.Unmarshal(v, &b); err != nil {
				return m, fmt.Errorf("%w: tokenizer.json: model.%s: %v", ErrNotModel, key, err)
			}
			switch key {
			case "ignore_merges":
				m.ignoreMerges = b
			case "fuse_unk":
				m.fuseUnk = b
			default:
				m.byteFallback = b
			}
		case "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "dropout":
			v, err := dec.ReadValue()
			if err != nil {
				return m, notJSON(err)
			}
			var dst any
			switch key {
			case "unk_token":
				dst = &m.unk
			case "continuing_subword_prefix":
				dst = &m.prefix
			case "end_of_word_suffix":
				dst = &m.suffix
			default:
				dst = &m.dropout
			}
			if err := json.Unmarshal(v, dst); err != nil {
				return m, fmt.Errorf("%w: tokenizer.json: model.%s: %v", ErrNotModel, key, err)
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return m, notJSON(err)
			}
		}
	}
	_, err := dec.ReadToken()
	return m, notJSONOrNil(err)
}

func parseVocab(dec *jsontext.Decoder) (map[string]int32, error) {
	if _, err := dec.ReadToken(); err != nil {
		return nil, notJSON(err)
	}
	vocab := make(map[string]int32)
	for dec.PeekKind() != '}' {
		k, err := readString(dec)
		if err != nil {
			return nil, notJSON(err)
		}
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, notJSON(err)
		}
		if tok.Kind() != '0' {
			return nil, fmt.Errorf("%w: tokenizer.json: model.vocab[%q] is not a number", ErrNotModel, k)
		}
		id, err := tok.Int()
		if err != nil || id < 0 || id >= MaxPieces {
			return nil, fmt.Errorf("%w: tokenizer.json: model.vocab[%q] = %s, not an ID in [0, %d)", ErrNotModel, k, tok, MaxPieces)
		}
		if _, ok := vocab[k]; !ok && len(vocab) == MaxPieces {
			return nil, fmt.Errorf("%w: tokenizer.json: more than %d tokens in model.vocab", ErrTooLarge, MaxPieces)
		}
		vocab[k] = int32(id)
	}
	_, err := dec.ReadToken()
	return vocab, notJSONOrNil(err)
}

// parseMerges reads merges in either spelling: "a b" strings (the
// reference's older files) or [a, b] pairs (its newer ones, which can
// name tokens with a space).
func parseMerges(dec *jsontext.Decoder) ([][2]string, error) {
	if err := expectDelim(dec, '[', "model.merges"); err != nil {
		return nil, err
	}
	var out [][2]string
	var spelling jsontext.Kind // the first merge's; the reference refuses a mix
	for dec.PeekKind() != ']' {
		if len(out) == MaxPieces {
			return nil, fmt.Errorf("%w: tokenizer.json: more than %d model.merges", ErrTooLarge, MaxPieces)
		}
		if spelling == 0 {
			spelling = dec.PeekKind()
		} else if dec.PeekKind() != spelling {
			return nil, fmt.Errorf("%w: tokenizer.json: model.merges[%d] is spelled otherwise than model.merges[0] (\"a b\" and [a, b] mixed)", ErrNotModel, len(out))
		}
		switch dec.PeekKind() {
		case '"':
			s, err := readString(dec)
			if err != nil {
				return nil, notJSON(err)
			}
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				// The reference: BadMerges, a line that is not two parts.
				return nil, fmt.Errorf("%w: tokenizer.json: model.merges[%d] = %q is not two tokens separated by a space", ErrNotModel, len(out), s)
			}
			out = append(out, [2]string{a, b})
		case '[':
			dec.ReadToken()
			var pair [2]string
			for i := range 2 {
				s, err := readString(dec)
				if err != nil {
					return nil, fmt.Errorf("%w: tokenizer.json: model.merges[%d]: %v", ErrNotModel, len(out), err)
				}
				pair[i] = s
			}
			if tok, err := dec.ReadToken(); err != nil || tok.Kind() != ']' {
				return nil, fmt.Errorf("%w: tokenizer.json: model.merges[%d] is not a pair", ErrNotModel, len(out))
			}
			out = append(out, pair)
		default:
			return nil, fmt.Errorf("%w: tokenizer.json: model.merges[%d] is neither \"a b\" nor [a, b]", ErrNotModel, len(out))
		}
	}
	_, err := dec.ReadToken()
	return out, notJSONOrNil(err)
}
