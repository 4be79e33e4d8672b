// Package tokenize encodes text to token IDs with a SentencePiece model
// (a .model file), exactly as Google's SentencePiece library does.
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
// Encoded as the reference encodes it, which defines it: the normalizer
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
// With ErrUnsupported: the WORD and CHAR model types (no language model
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
// # Concurrency
//
// A Model is immutable after Load and safe for concurrent use: one Model
// serves a whole worker pool. Its pools of scratch memory are its own;
// the package holds no mutable state.
package tokenize
