// Package gen is the parent of the generators of synthetic data the demo,
// the transform stage's calibration, the benchmarks and tests draw from:
//
//	photos  photo-like JPEGs made from a seed
//	synth   class-folder image datasets with a realistic spread of sizes
package gen
