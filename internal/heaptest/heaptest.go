// Package heaptest measures what a call allocates, for the tests of
// bounded reads. It imports nothing of the project, so that the in-package
// tests of kind and release, which the shared exportertest imports, can use
// it.
package heaptest

import "runtime"

// Allocated is what f allocated on the heap, all goroutines' allocations
// in that time included: the bound of a streamed read is what it holds at
// once, whatever the value's size.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
