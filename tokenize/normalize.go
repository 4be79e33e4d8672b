package tokenize

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// normalizer is the reference's Normalizer (normalizer.cc): the model's
// precompiled character map (NFKC and its own rules, compiled into a
// darts-clone double array), whitespace handling, and the replacement of
// invalid UTF-8. It rewrites a text into the string the model segments.
type normalizer struct {
	units []uint32 // the double array, or nil for none (identity)
	strs  []byte   // NUL-terminated replacement strings
	repl  []byte   // U+FFFD
	// user matches user-defined symbols, which are not normalized: the
	// keys of user whose ID has that type in userTypes (all of them if
	// userTypes is nil), tried only at bytes in userFirst.
	user           *byteTrie
	userTypes      []int8
	userFirst      [256]bool
	addDummyPrefix bool
	removeExtraWS  bool
	escape         bool
	suffix         bool // TrainerSpec.treat_whitespace_as_suffix
}

const (
	spaceSymbol = "\u2581" // ▁, what escape_whitespaces writes for ' '
	replacement = "\uFFFD" // what one byte of invalid UTF-8 becomes

	// maxMapResults is how many prefixes of the text the reference's
	// normalizer asks its map for (kMaxTrieResultsSize); the longest of
	// them wins.
	maxMapResults = 32
)

// newNormalizer checks the precompiled map's framing as the reference
// does (DecodePrecompiledCharsMap) and keeps its parts.
func newNormalizer(spec normalizerSpec, suffix bool, user *byteTrie, userTypes []int8, userKeys []string) (*normalizer, error) {
	n := &normalizer{
		repl:           []byte(replacement),
		user:           user,
		userTypes:      userTypes,
		addDummyPrefix: spec.addDummyPrefix,
		removeExtraWS:  spec.removeExtraWS,
		escape:         spec.esc,
		suffix:         suffix,
	}
	for _, k := range userKeys {
		n.userFirst[k[0]] = true
	}
	blob := []byte(spec.charsMap)
	if len(blob) == 0 {
		return n, nil
	}
	// <trie size, 4 bytes LE><double array><NUL-terminated strings>. The
	// reference compares the trie's size with the whole blob; the trie
	// must fit after the size itself, or it reads past the end.
	if len(blob) <= 4 {
		return nil, fmt.Errorf("%w: normalization map %q is broken (%d bytes)", ErrNotModel, spec.name, len(blob))
	}
	size := binary.LittleEndian.Uint32(blob)
	if uint64(size) > uint64(len(blob)-4) {
		return nil, fmt.Errorf("%w: normalization map %q: its trie (%d bytes) exceeds the map (%d bytes)", ErrNotModel, spec.name, size, len(blob))
	}
	trie := blob[4 : 4+size]
	n.units = make([]uint32, len(trie)/4) // set_array(size / unit_size): a partial unit is not read
	for i := range n.units {
		n.units[i] = binary.LittleEndian.Uint32(trie[4*i:])
	}
	n.strs = blob[4+size:]
	return n, nil
}

// normalize appends text's normalized form to dst.
func (n *normalizer) normalize(dst, text []byte) ([]byte, error) {
	start := len(dst)
	if n.removeExtraWS { // leading whitespace, as normalized
		for len(text) > 0 {
			sp, consumed, err := n.prefix(text)
			if err != nil {
				return dst, err
			}
			if string(sp) != " " {
				break
			}
			text = text[consumed:]
		}
	}
	if len(text) == 0 {
		return dst, nil
	}
	if !n.suffix && n.addDummyPrefix {
		dst = n.space(dst)
	}
	prevSpace := n.removeExtraWS
	for len(text) > 0 {
		sp, consumed, err := n.prefix(text)
		if err != nil {
			return dst, err
		}
		for prevSpace && len(sp) > 0 && sp[0] == ' ' {
			sp = sp[1:]
		}
		if len(sp) > 0 {
			if n.escape {
				for _, c := range sp {
					if c == ' ' {
						dst = append(dst, spaceSymbol...)
					} else {
						dst = append(dst, c)
					}
				}
			} else {
				dst = append(dst, sp...)
			}
			prevSpace = sp[len(sp)-1] == ' '
		}
		text = text[consumed:]
		if !n.removeExtraWS {
			prevSpace = false
		}
	}
	if n.removeExtraWS { // trailing whitespace
		space := " "
		if n.escape {
			space = spaceSymbol
		}
		for len(dst)-start >= len(space) && string(dst[len(dst)-len(space):]) == space {
			dst = dst[:len(dst)-len(space)]
		}
	}
	if n.suffix && n.addDummyPrefix {
		dst = n.space(dst)
	}
	return dst, nil
}

func (n *normalizer) space(dst []byte) []byte {
	if n.escape {
		return append(dst, spaceSymbol...)
	}
	return append(dst, ' ')
}

// prefix normalizes the start of text (NormalizePrefix): a user-defined
// symbol as it is, else the longest prefix the map rewrites, else one
// character as it is, or U+FFFD for one byte of invalid UTF-8.
func (n *normalizer) prefix(text []byte) (norm []byte, consumed int, err error) {
	if n.user != nil && n.userFirst[text[0]] {
		if l, _ := n.user.longestPrefixOf(text, n.userTypes, pieceUserDefined); l > 0 {
			return text[:l], l, nil
		}
	}
	if n.units != nil {
		length, value, err := n.lookup(text)
		if err != nil {
			return nil, 0, err
		}
		if length > 0 {
			s := n.strs[value:]
			if end := bytes.IndexByte(s, 0); end >= 0 {
				return s[:end], length, nil
			}
			return nil, 0, fmt.Errorf("%w: normalization map: replacement at %d is not terminated", ErrDamagedModel, value)
		}
	}
	r, size := utf8.DecodeRune(text)
	if r == utf8.RuneError && size == 1 {
		return n.repl, 1, nil
	}
	return text[:size], size, nil
}

// lookup is darts-clone's commonPrefixSearch for the longest of the first
// maxMapResults prefixes of text that the map holds: its length (0 for
// none) and its value, the offset of its replacement in strs. A walk
// that leaves the array, or a value past strs, is a damaged map (the
// reference reads outside its buffer).
func (n *normalizer) lookup(text []byte) (length int, value uint32, err error) {
	units := n.units
	if len(units) == 0 {
		return 0, 0, nil
	}
	pos := unitOffset(units[0])
	found := 0
	for i, c := range text {
		pos ^= uint32(c)
		if uint64(pos) >= uint64(len(units)) {
			return 0, 0, fmt.Errorf("%w: normalization map: node %d outside its %d units", ErrDamagedModel, pos, len(units))
		}
		u := units[pos]
		if unitLabel(u) != uint32(c) {
			break
		}
		pos ^= unitOffset(u)
		if u>>8&1 == 1 { // has a leaf: a key ends here
			if found < maxMapResults {
				if uint64(pos) >= uint64(len(units)) {
					return 0, 0, fmt.Errorf("%w: normalization map: leaf %d outside its %d units", ErrDamagedModel, pos, len(units))
				}
				v := units[pos] & (1<<31 - 1)
				if uint64(v) >= uint64(len(n.strs)) {
					return 0, 0, fmt.Errorf("%w: normalization map: replacement at %d past its %d bytes", ErrDamagedModel, v, len(n.strs))
				}
				length, value = i+1, v
			}
			found++
		}
	}
	return length, value, nil
}

func unitLabel(u uint32) uint32  { return u & (1<<31 | 0xFF) }
func unitOffset(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }
