//go:build !unix

package acemq_test

// processCPU is 0 where getrusage is not available: the benchmarks'
// cpu-ns/op is then 0 and says nothing.
func processCPU() int64 { return 0 }
