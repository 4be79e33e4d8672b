package tokenize

// Probes are texts every tokenizer in use encodes to at least one ID:
// English with digits and punctuation, Latin letters with diacritics,
// Japanese, an emoji. A SentencePiece model encodes any text to
// something (its unknown piece at least); a byte-level BPE or a
// tiktoken encoding has a token for every byte; a model that encodes
// one of these to nothing drops text without a word, as its reference
// does.
var Probes = [...]string{
	"The quick brown fox jumps over the lazy dog. 0123456789",
	"Größe, café, naïve façade",
	"日本語のテキスト",
	"🙂",
}

// Silent returns the Probes the model encodes to no IDs at all: every
// one for a model that maps text to nothing (a tokenizer.json of an
// empty vocabulary, or of neither the byte alphabet nor an unk_token),
// some for one whose vocabulary misses some scripts' characters and has
// no unk_token to stand for them (the reference drops such characters,
// and so does Encode). Its caller decides: `brand index --tokenizer`
// refuses the first, every document of which would count 0 tokens, and
// warns of the second.
func (m *Model) Silent() []string {
	var silent []string
	var ids []int32
	for _, p := range Probes {
		var err error
		if ids, err = m.Append(ids[:0], []byte(p)); err == nil && len(ids) == 0 {
			silent = append(silent, p)
		}
	}
	return silent
}
