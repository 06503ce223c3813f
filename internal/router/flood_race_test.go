//go:build race

package router

// floodRace relaxes the sizes and timing bounds of the flood tests under
// the race detector (which also caps a process at 8,128 goroutines).
const floodRace = true
