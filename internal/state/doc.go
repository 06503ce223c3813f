// Package state holds the router's durable state: the handoff document
// (narwhal.handoff v1) that lets a restarted router resume and a standby
// take over, the fenced lease (narwhal.router-lease v1) that decides which
// router controls the fleet, and the standby follower that shadows a
// primary and takes over when it stops answering.
//
// Every file is versioned JSON written atomically (DESIGN.md rule 4).
// Unlike the reference, a state file that cannot be parsed or comes from a
// newer build is a startup error, never a silent cold start: the operator
// moves it aside to cold-start. A missing file is a normal cold start.
//
// Nothing here holds global state: time and ids come in through
// internal/ports, paths and clients through the caller.
package state
