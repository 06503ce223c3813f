//go:build !race

package devfleet

const raceEnabled = false
