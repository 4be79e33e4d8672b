// Package shuffle computes the sample order of a training epoch: a seeded
// chunk-then-sample permutation that any batch of any epoch can be computed
// from alone, without state and without materialising the whole order.
//
// # Why chunk-then-sample
//
// Samples live packed in large chunks, and a chunk is read from object
// storage whole. A uniform permutation of all samples would make every
// batch touch a different set of chunks, so the cache would need to hold the
// whole dataset to avoid reading each chunk once per sample. A pure chunk
// order would read each chunk once, but would feed the model runs of
// correlated samples. The shuffle does both, at two levels:
//
//  1. The chunk IDs are permuted (seeded by seed and epoch) and the permuted
//     list is cut into windows of W consecutive chunks (the last window may
//     be shorter).
//  2. Within each window, the samples of its chunks are permuted (seeded by
//     seed, epoch and window index). The epoch order is the windows'
//     permutations concatenated.
//
// A reader of the epoch therefore needs only the W chunks of the current
// window at a time (plus the next window's for prefetch), and each chunk is
// read once per epoch; within a window samples are uniformly mixed.
//
// The window size trades randomness against cache: a sample can only land
// next to samples from the W-1 other chunks of its window, and a batch of B
// samples draws on average B/W from each of them. W = 1 gives chunk-sized
// runs of one chunk's samples (poor mixing, one chunk of cache); W equal to
// the number of chunks gives a uniform permutation of the dataset (and needs
// the whole dataset in cache). Pick W so that W chunks (twice that with
// prefetch) fit the cache, and so that a batch spans many chunks: B/W well
// below a chunk's sample count.
//
// # Batches and ranks
//
// Global batch M is epoch positions [M*B*world, (M+1)*B*world); rank r takes
// the B positions starting at M*B*world + r*B, clipped to the epoch. The
// order never depends on the world size or batch size, only the cut. With
// drop_last a partial final global batch is dropped; without it the final
// batch may be short, and some ranks' slices short or empty (an empty slice
// is valid, not an error). Params.GlobalBatch and AppendShares state the
// same cut for a reader of every rank at once (a cluster assigning a
// global batch to ranks, the planner replaying a gateway).
//
// # Costs
//
//   - NewEpoch: O(chunks) time and memory.
//   - Window, AppendRange, Batch, ChunksOfRange: O(samples in the windows
//     touched), never O(dataset); a batch usually touches one window, two at
//     a window boundary. Callers serving many batches from one window should
//     cache Window's result.
//   - WindowOf: O(log windows).
//
// # Stability
//
// The order is a cross-language specification, fixed forever: training runs
// must be reproducible and other implementations (a Python data loader, say)
// must compute the same batches. The randomness is math/rand/v2's PCG (whose
// algorithm Go documents and promises not to change) used only through
// Uint64, with seed derivation, bounded integers and the Fisher–Yates loop
// defined here, not rand.IntN or rand.Shuffle. docs/shuffle.md specifies it
// exactly; testdata/golden.json pins outputs, and testdata/reference.py, an
// independent Python implementation, is checked against Go in the tests.
//
// # Concurrency
//
// An Epoch is immutable and safe for concurrent use. The package holds no
// mutable state and no caches; the gateway caches windows.
package shuffle
