// Package bucket batches images by shape, as text-to-image models train:
// each sample goes to the bucket (a height × width) whose aspect ratio is
// nearest its own, each bucket's batch size is set by a budget of pixels
// or latent tokens a rank and step (so that a step costs about the same
// memory whatever its bucket), and the buckets' batches are interleaved
// so that every bucket's share of the steps stays within one batch of its
// share of the samples at every step.
//
// Clips are bucketed by (height, width, frames) alike (NearestClip): a
// video goes to the bucket nearest its aspect ratio among those whose
// frames it holds, the longest of equally near; a clip's cost in the
// budget is its frames' pixels, or its latent tokens under a causal
// video VAE's temporal factor (Budget).
//
// Everything here is a pure function of its arguments: a sample's bucket
// of its size and the bucket list, an epoch's steps of the buckets'
// sample counts, their batch sizes, the world size and a seed. That is
// what lets any gateway compute any step of a job, and a job resume at
// another world size exactly (Resume): the state of an epoch is how many
// samples of each bucket are taken, which the steps taken so far, at the
// world sizes they were taken at, determine.
//
// The package knows nothing of datasets or HTTP; the gateway's bucket
// unit (internal/batch/units/buckets) lays batches out with it.
package bucket
