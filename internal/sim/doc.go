// Package sim is narwhal's deterministic discrete-event fleet simulator. It
// drives the very same scheduling core the router drives (internal/sched)
// under virtual time, with one enginemodel per engine (the service model
// simengine also runs), so that role control can be compared on long,
// moving traces in seconds and tested without a network or a clock.
//
// Everything is a function of the inputs: arrivals come from a seeded
// generator or a recorded trace, ties in the event queue break on an
// insertion sequence number, and no map is iterated where order matters.
// The same seed gives byte-identical results.
package sim
