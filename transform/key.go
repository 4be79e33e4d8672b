package transform

import (
	"hash/fnv"

	"github.com/brandgw/brand/internal/seeded"
)

// domainKey is the stream domain of a key's seed: the ASCII bytes
// "brandtk" and a zero byte, big-endian. It differs from domainTransform
// in its seventh byte, so no operator's stream (domainTransform+k, k <
// MaxOps) coincides with it.
const domainKey uint64 = 0x6272616e64746b00

// SampleKey is the key of a sample's draws in a job: the one rule by
// which a server (and anyone reproducing it) names the draws of sample
// ID sample of dataset in epoch epoch of a job seeded jobSeed
// (docs/transform.md §4.1).
//
// The key's seed is drawn from the job's seed and the dataset's name, so
// that the datasets of a mixture, whose sample IDs all start at 0, draw
// different crops for equal IDs; epoch is the epoch of the sample's own
// order (a mixture component's pass); sample is the sample's ID in its
// dataset. Nothing else enters: not the world size, the rank, the node,
// the batch, the offset or the time.
func SampleKey(jobSeed uint64, dataset string, epoch, sample uint64) Key {
	return Key{Seed: KeySeed(jobSeed, dataset), Epoch: epoch, Sample: sample}
}

// KeySeed is the seed of a job's keys on one dataset: the first output of
// the stream seeded by (jobSeed, 0, "brandtk\0", FNV-1a 64 of the
// dataset's name in UTF-8). It depends on those alone, so a server
// computes it once per dataset of a request.
func KeySeed(jobSeed uint64, dataset string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(dataset))
	s := seeded.New(jobSeed, 0, domainKey, h.Sum64())
	return s.Uint64()
}
