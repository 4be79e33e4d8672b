// Package tokenize encodes text to token IDs with a SentencePiece model
// (a .model file), exactly as Google's SentencePiece library does, or
// with a Hugging Face tokenizer.json of byte-level BPE (Llama 3, Qwen 2
// and 3, GPT-2, GPT-NeoX and Pythia, OLMo), exactly as Hugging Face's
// tokenizers does, or with the rank file of one of tiktoken's named
// encodings (cl100k_base.tiktoken, o200k_base.tiktoken, ...), exactly as
// tiktoken does. Load tells them apart by their content; callers hold a
// *Model whatever the file (the sections on byte-level BPE and on
// tiktoken are below).
//
// # Why
//
// A token dataset whose documents are text (a Parquet string column,
// .txt members) is tokenized on the data node, once at index time to
// count each document's tokens and again when its chunk is decoded for a
// token job. A language model trained on those IDs is later run with the
// same tokenizer through the reference library, so the IDs must be the
// reference's, to the last one, for every text, including text that is
// not valid UTF-8. Two runs and two nodes must agree too: Encode is a
// pure function of the model's bytes and the text's.
//
// The reference is SentencePieceProcessor.Encode (Python:
// sp.encode(text), no BOS or EOS added). Its encoding code is unchanged
// from 0.1.97 (Debian's python3-sentencepiece, which the tests run)
// through 0.2.x. TestReference has the reference train ten models of
// both kinds with every option that changes encoding, edits seven more
// the way a file could be, and requires identical IDs on 1,599 texts in
// 14 languages and 10 scripts, with emoji, combining marks, characters
// outside the models' coverage, whitespace of every kind and invalid
// UTF-8 (and that the two edits refused below are refused, though the
// reference encodes with them). TestGolden checks two committed models
// against the reference's IDs where Python is not.
//
// # How
//
// Load parses the ModelProto itself (protowire, bounded) and checks it as
// the reference's loader does. The normalizer is this package's: the
// model's precompiled character map (NFKC and the model's own rules, a
// darts-clone double array read in place), user-defined symbols kept as
// they are, whitespace removed, escaped to U+2581 and prefixed as the
// model says. Then the model segments the normalized text:
//
//   - Unigram (the trainer's default; T5, ALBERT, XLNet, mT5): this
//     package's Viterbi search, the reference's optimized encoder with its
//     arithmetic to the bit (scores widened to double and stored as
//     float, in its order), so that near-ties fall the same way.
//   - BPE (Llama 1 and 2, Mistral, Gemma): the merging is
//     github.com/eliben/go-sentencepiece's, given a model with the pieces
//     and nothing to normalize; user-defined symbols are found here, and
//     the text between them and between words is merged a segment at a
//     time where no piece can cross (bpe.go says why that is exact).
//
// then an unknown piece becomes its bytes' <0xXX> pieces where the model
// has byte fallback, and a run of unknown pieces one unknown ID where it
// has not, as the reference does.
//
// # Invalid UTF-8
//
// With a SentencePiece model (a tokenizer.json's rule is in its section
// below), encoded as the reference encodes it, which defines it: the normalizer
// replaces each byte that does not start a valid UTF-8 sequence
// (overlong forms, surrogates and code points past U+10FFFF included)
// with U+FFFD, one for each byte, and that U+FFFD is not normalized
// again; the model then encodes it as any character: its piece, its
// bytes' pieces with byte fallback (<0xEF> <0xBF> <0xBD>), or unknown.
// (A U+FFFD already in the text is normalized like any character, and
// nmt_nfkc deletes it.) Nothing is refused: a document with a stray byte
// keeps its other tokens.
//
// # Refused
//
// (For a tokenizer.json, see its section below.) With ErrUnsupported:
// the WORD and CHAR model types (no language model
// in use has them; the reference has them, this package does not); a BPE
// model that does not escape whitespace, has UNUSED pieces (the reference
// splits a merge into one back, the library does not), or whose
// normalization map writes invalid UTF-8 (the library splits characters
// by valid UTF-8, the reference by first bytes); a NUL byte in a normal,
// user-defined or unused piece (the reference's tries end keys at a NUL).
// No trainer writes any of these. With ErrTooLarge: the bounds below.
// The reference's self-test samples in a model are not run, and its
// options beyond plain encoding (sampling, n-best, BOS/EOS, reversing)
// are not offered.
//
// A hostile model costs what its bytes cost: Load counts pieces before
// allocating them, reads strings in place, and allocates at most 40
// times the file plus 4 MiB (TestLoadAllocation, FuzzLoad), within
// MaxModelBytes, MaxPieces and MaxPieceBytes. A normalization map that
// points outside itself is found when a text reaches the damage:
// ErrDamagedModel, never a read out of bounds.
//
// # Costs
//
//   - Load: a 251 kB BPE model with the nmt_nfkc map allocates 1.1 MB; a
//     BPE model costs the library about 450 bytes a piece (a vocabulary
//     of 262,144 pieces: about 120 MB), a unigram model about 30 bytes a
//     byte of its pieces.
//   - Encode: one pass of normalization, then the model. Measured by
//     BenchmarkEncode (bench_test.go says how to run it) in tokens per
//     CPU second, one goroutine, on a shared 2-core AMD EPYC: English
//     prose (Newton's Opticks) 14.5 M with a 1,000-piece BPE model, 7.9 M
//     with a 16,000-piece one, 15.5 M and 3.6 M with unigram models of
//     600 and 16,000 pieces; generated text in 14 languages, a third of
//     its bytes in scripts written without spaces, 3.4 M and 1.0 M (BPE),
//     11.1 M and 3.3 M (unigram). BPE's figures come from its word cache
//     (65,536 words, a few MB a model): merging itself, the library's, is
//     about 2 M tokens a CPU second, and text without spaces is all
//     merging. Two goroutines sharing a model do as well per CPU second
//     (BenchmarkEncodeParallel).
//   - Memory per call: the normalized text, 12 bytes a byte of it for
//     unigram, the library's about 100 bytes a byte of the word being
//     merged for BPE (a run without spaces is one word), and 4 bytes an
//     ID; scratch up to 64 KiB of text is pooled per model. MaxTextBytes
//     bounds a text.
//
// # Byte-level BPE (tokenizer.json)
//
// The reference is Hugging Face's tokenizers, Tokenizer.encode with
// add_special_tokens false (Python: tok.encode(text,
// add_special_tokens=False).ids): its Rust core, which the tests run
// through the npm package tokenizers 0.23.2 (scripts/ensure-hf-tokenizers.sh),
// as format/parquet's tests run DuckDB from npm. The encoding is the
// reference's Tokenizer::encode up to the model's IDs (hfbpe.go lists
// its steps); the post-processor, the decoder, truncation and padding
// are not read, so no BOS or EOS is added, as the SentencePiece path adds
// none, and Special reports no BOS, EOS or pad (the file does not name
// them; its tokenizer_config.json does): a concat token job over such a
// dataset is given eos=.
//
// What is encoded, each field as the reference reads it (a field the
// reference requires is required, the same errors for the same damage):
//
//   - model: "type": "BPE" with vocab and merges, merges spelled either
//     way ("a b" strings or [a, b] pairs, not mixed), a pair listed twice
//     ranked by its last place, ignore_merges (a pre-tokenized word that
//     is a token is that token, as Llama 3 has it), unk_token (null: a
//     byte outside the vocabulary is dropped; else unk, fused or not by
//     fuse_unk); byte_fallback false; dropout null or 0; no subword
//     prefix or suffix. The merging is the reference's own queue
//     (Word::merge_all), not the textbook loop, which differs from it
//     where two pairs merge into one token.
//   - normalizer: null, NFC, NFD, NFKC, NFKD (golang.org/x/text's
//     tables), or a Sequence of them.
//   - pre_tokenizer: ByteLevel (add_prefix_space; use_regex, GPT-2's
//     split), last, after any of Split (a String or a Regex; behavior
//     Removed, Isolated, Contiguous, MergedWithPrevious or
//     MergedWithNext; invert) and Digits (individual_digits), in a
//     Sequence.
//   - added_tokens: matched before the model as the reference matches
//     them, leftmost-longest: those with normalized false in the raw
//     text, those with normalized true in the normalized text between
//     them; single_word, lstrip and rstrip as its find_matches applies
//     them (\w and \s as Rust's regex crate has them). Each gets the ID
//     the reference gives it, not the file's "id": the vocabulary's ID of
//     its content, else the next after the vocabulary, in file order.
//
// The pre-tokenizer regexes use lookahead (\s+(?!\S)), which Go's
// regexp lacks. The three patterns most byte-level models ship are
// matched by hand (hfregex.go): GPT-2's (ByteLevel's own; GPT-NeoX,
// Pythia, OLMo), Llama 3's (tiktoken's cl100k) and Qwen 2's (the same
// with single digits), and tiktoken's o200k_base's wherever a file
// ships it (see tiktoken encodings). Each is its alternation written out with
// Oniguruma's backtracking (the reference's engine), exact by
// construction and held to the reference by the tests, and costs a
// table lookup a character. Any other pattern (DeepSeek V3's three, for
// one) is matched by github.com/dlclark/regexp2 v2.13.0, a maintained
// backtracking engine with lookaround and Unicode classes, pinned in
// go.mod: a general engine costs a rune slice and a backtracking search
// a piece, which the known patterns are spared. Its .NET semantics agree
// with Oniguruma's where these patterns go (TestHFReference holds
// DeepSeek V3's to the reference), except in how a search steps past an
// empty match: a pattern that matches the empty string is refused, and
// one that matches it only in some text (a bare lookahead) fails that
// text with ErrPattern. A search is bounded by a MatchTimeout of 2 s
// (regexp2 keeps a clock goroutine of its own while such searches run)
// and regexp2's default backtracking stack: a pattern that would
// backtrack past them fails the text with ErrPattern, never returns
// another split.
//
// TestHFReference builds a GPT-2-style file (ByteLevel with its regex,
// "a b" merges), a Llama-3-style one (Split with Llama 3's pattern, then
// ByteLevel without regex, [a, b] merges, ignore_merges, its special
// tokens and a normalized single-word token), a Qwen-style one (NFC,
// Qwen 2's pattern, <|im_start|> <|im_end|> <|endoftext|>, a pair
// merged twice, an lstrip and rstrip token), a DeepSeek-V3-style one
// (its three Splits, matched by regexp2) and one with every other
// option (NFKC, Digits, Split by strings with every behavior, inverted,
// add_prefix_space, missing bytes with a fused unk), their merges learned
// from the generated corpus by the test's trainer, and requires the
// reference's IDs on 3,000 texts in 14 languages and 10 scripts with
// code, contractions of both cases, numbers, emoji with ZWJ sequences,
// whitespace runs of every kind, added tokens inside text and invalid
// UTF-8. TestHFGolden checks the committed Llama-3-style file
// (testdata/hf-golden-tokenizer.json) against the reference's IDs where
// node is not.
//
// Invalid UTF-8, for a tokenizer.json: the reference takes only valid
// text (a Python or Rust str, a JavaScript string), so its users decode
// bytes first, with Python's bytes.decode(errors="replace") or Rust's
// String::from_utf8_lossy, which replace each maximal subpart of an
// ill-formed sequence (the Unicode Standard's recommended practice,
// §3.9) with one U+FFFD: "\xe6\x97" (a character cut short) is one
// U+FFFD, "\xc0\x80" two, "\xed\xa0\x80" (a surrogate) three. That is
// the rule here, and the tests decode the texts with the WHATWG decoder,
// which follows it too, before the reference sees them. (Go's own
// replacement, one U+FFFD a byte, is not it.) The U+FFFD is then text
// like any other: normalized, pre-tokenized, its three bytes merged.
//
// Bounds: the file is at most MaxModelBytes, read a token at a time
// (jsontext), its vocabulary and merges counted against MaxPieces as
// they are read, its added tokens against MaxAddedTokens, its normalizer
// and pre-tokenizer against 64 KiB and 64 steps; a merge naming a token
// not in the vocabulary (or making one) is refused, as the reference
// refuses it. Loading allocates at most 40 times the file plus 4 MiB
// (TestLoadTokenizerJSONAllocation: 21 times for a file of 65,536
// two-byte tokens and merges; FuzzLoad). No pattern is compiled from the
// file, so no regex can blow up. VocabSize is the largest ID plus one.
//
// Costs: BenchmarkEncode, one goroutine, tokens per CPU second in one
// run on a shared 2-core Xeon, Llama-3-style files beside SentencePiece
// BPE models of the same sizes on the same corpora: English 22.1 M
// (1,000 tokens) and 12.8 M (16,000) against 12.8 M and 3.4 M;
// multilingual 6.8 M and 3.7 M against 3.7 M and 1.5 M. With regexp2's
// patterns (DeepSeek-V3-style, 1,000 tokens) 4.9 M and 2.0 M: three
// general searches a piece. Words of up to 64 bytes are cached (the
// SentencePiece path's word cache, 65,536 words, a copy of each); a word
// is merged with a heap of its candidate pairs, O(n log n) in its bytes.
//
// # tiktoken encodings
//
// A tiktoken rank file (load_tiktoken_bpe's format: one line a token,
// its bytes in base64, a space, its rank, which is its ID) holds neither
// the pre-tokenizer's pattern nor the special tokens: tiktoken fixes them
// per named encoding. The file's SHA-256 names the encoding (the hash
// tiktoken checks a download against): r50k_base, p50k_base, cl100k_base
// and o200k_base, their files as OpenAI publishes them (p50k_edit reads
// p50k_base's and loads as it). A rank file of another SHA-256 is
// refused with ErrUnsupported, its pattern being unknown; File names the
// encoding ("cl100k_base.tiktoken").
//
// The reference is tiktoken's encode_ordinary, its Rust core, which the
// tests run through the npm package tiktoken 1.0.22 (WebAssembly;
// scripts/ensure-tiktoken.sh), taking the rank files from the same
// package. Special tokens are text: a document that spells
// <|endoftext|> is encoded as those characters, as encode_ordinary does
// (tiktoken's encode refuses such text by default; data preparation
// encodes documents with encode_ordinary and puts <|endoftext|> between
// them). Special reports <|endoftext|> as EOS, so that a concat token
// job puts it between documents; VocabSize is tiktoken's n_vocab (the
// special tokens' IDs included: cl100k_base 100,277, o200k_base
// 200,019).
//
// The encoder is a tokenizer.json's (hfbpe.go): the pattern's matches
// are the words (text between matches is dropped, as tiktoken's
// find_iter drops it; the patterns match everywhere), a word that is a
// token is that token (ignore_merges), and the other words' bytes are
// merged. tiktoken merges the adjacent pair whose joined bytes have the
// lowest rank, leftmost on a tie; byteBPE's queue merges the pair of
// lowest rank, leftmost on a tie, so the merges are derived from the
// ranks: each way to cut a token into two tokens is a merge of that
// token's rank (about 2.2 a token). Every byte must be a token, as
// tiktoken requires of a byte that merges with nothing.
// TestTiktokenMergeByRank holds the derived merges to tiktoken's loop,
// written out in the test, on random rank tables, FuzzTiktokenRanks on
// fuzzed ones. The patterns are matched by hand (hfregex.go):
// r50k_base's and p50k_base's are GPT-2's, cl100k_base's Llama 3's, and
// o200k_base's (words cut where lower case turns upper, marks in words)
// its own, which TestO200KPattern also holds to regexp2's matches on
// random strings of the characters its classes tell apart. Invalid UTF-8
// is replaced as for a tokenizer.json (tiktoken takes only valid text).
//
// TestTiktokenReference requires the reference's IDs for all four
// encodings on the 3,000 texts of TestHFReference.
//
// Bounds: a rank file is read a line at a time, within MaxModelBytes,
// MaxPieces tokens (a rank below MaxPieces), tokens of at most 4 KiB and
// MaxPieceBytes in all; a line that is not canonical base64, a space and
// a decimal rank without sign or leading zero, a rank or a token twice
// (tiktoken's CoreBPE refuses an encoder and decoder of different
// sizes), and a missing byte are refused with ErrNotModel or
// ErrTooLarge. Loading allocates within the bound of a tokenizer.json
// (TestTiktokenReference, TestLoadTiktokenRefuses, FuzzLoad,
// FuzzTiktokenRanks). cl100k_base's file of 1.7 MB loads in about half
// a second on a shared 2-core Xeon and allocates 31 MB (233,378 derived
// merges), o200k_base's of 3.6 MB 56 MB (446,189).
//
// Costs: BenchmarkEncode, one goroutine, tokens per CPU second in one
// run on a shared, loaded 2-core Xeon (the figures move by a third
// between runs there): cl100k_base 5.3 M on English and 3.6 M on the
// multilingual corpus, o200k_base 5.2 M and 1.9 M, beside the
// Llama-3-style tokenizer.json of 16,000 tokens (7.7 M and 2.2 M) and a
// SentencePiece BPE model of 16,000 pieces (4.8 M and 1.0 M). Its words
// are cached as a tokenizer.json's are.
//
// # Concurrency
//
// A Model is immutable after Load and safe for concurrent use: one Model
// serves a whole worker pool. Its pools of scratch memory are its own;
// the package holds no mutable state.
package tokenize
