//go:build !race

package router

const floodRace = false
