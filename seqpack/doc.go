// Package seqpack lays out an epoch of a token dataset as fixed-length
// sequences: which tokens of which documents fill sequence s of epoch e,
// as a pure function of the epoch's document order, the documents' token
// counts, the sequence length, the mode, the seed and the epoch. It does
// no I/O and knows nothing of formats or HTTP: a server reads the pieces
// it names and writes input_ids and position_ids from them.
//
// # Why packing is planned, not buffered
//
// A language model's step takes B sequences of exactly seq tokens, and
// documents come in every length. Trainer-side packers fill a buffer as
// documents arrive: their output depends on the worker, the buffer and
// everything read before, so it cannot resume at another world size, and
// it fills poorly unless the buffer is large. Brand knows the whole
// epoch's order before it reads a byte (package shuffle), and a token
// dataset's index knows every document's token count, so packing is a
// planning problem over a known window, solved once, identically on
// every replica:
//
//   - BestFit packs each shuffle window's documents on their own. A
//     document of seq tokens or more is cut into whole sequences of seq
//     tokens and a remainder; the remainders and the shorter documents
//     are packed best-fit-decreasing (longest first, each into the
//     sequence with the least room that fits it), which fills more than
//     99.9 % of a realistic length mix's tokens with windows of 10,000
//     documents or more, and never cuts a document shorter than seq. The
//     window's sequences are then permuted with the seeded stream
//     (seed, epoch, "brandpak", window), so that best fit's long-first
//     order does not reach the trainer.
//   - Concat concatenates the epoch's documents, each followed by one EOS
//     token, and cuts the stream every seq tokens, as nanoGPT and
//     Megatron do: only the epoch's last sequence has pad.
//
// Sequences replace samples everywhere an ordinary job counts: a job's
// global batch M is sequences [M·B·world, (M+1)·B·world) of the epoch,
// cut into ranks, drop_last and offset= by shuffle.Params over
// NumSequences (Packing.Batch). A mixture of token datasets mixes
// sequences (shuffle.NewMixtureOf, each pass's length a packed epoch's
// NumSequences). docs/shuffle.md §12 specifies both modes exactly.
//
// Every token of every document the order draws is in exactly one piece
// of one sequence of the epoch (a document the order draws twice, in two
// of each). position_ids restart at 0 at each piece and run 0 … Pad-1
// over the pad (Sequence.AppendPositions), so the pieces are the
// segments a trainer's variable-length attention needs; what is pad is
// told by this layout, not by the pad token's value.
//
// # Costs
//
//   - NewPacking reads every window of the order once and keeps each
//     window's first sequence: O(windows) memory kept, O(documents) time
//     in Concat and O(documents + remainders · log) in BestFit (a radix
//     sort by length and a bit-set search per remainder), with scratch of
//     one window. Measured: 10 M documents of a realistic length mix,
//     windows of 80,000 documents, 2 shared and loaded cores: 0.4 to
//     0.6 s at seq 2,048 and 8,192 in BestFit, 0.15 to 0.25 s in Concat
//     (bench_test.go, docs/shuffle.md §12.5). A server computes it once
//     per (stream, epoch) and keeps it.
//   - Window, AppendRange, Batch: O(documents in the windows the range
//     reads), never O(dataset): a BestFit window is packed again whole
//     (7 to 16 ms for 80,000 documents), so a server serving many
//     batches of one window keeps Window's result.
//   - WindowOf, WindowsRead: O(log windows).
//
// # Stability
//
// Like the shuffle's, the layout is a cross-language specification fixed
// forever: a training run's sequences must be reproducible, after a
// restart, on another cluster, from another implementation.
// testdata/golden.json pins outputs, and testdata/reference.py, an
// independent Python implementation (standard library only, built on
// shuffle's), is checked against Go on them and on random epochs.
//
// # Concurrency
//
// A Packing is immutable and safe for concurrent use when its DocumentOrder and
// Tokens are. The package holds no mutable state and no caches.
package seqpack
