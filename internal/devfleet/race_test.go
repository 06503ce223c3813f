//go:build race

package devfleet

// raceEnabled relaxes the timing bounds of tests run under the race detector.
const raceEnabled = true
