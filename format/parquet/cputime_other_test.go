//go:build !unix

package parquet

// cpuTime is not measured here: BenchmarkDecodeHub's cpu-ns/sample is 0.
func cpuTime() int64 { return 0 }
