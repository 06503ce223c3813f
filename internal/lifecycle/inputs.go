package lifecycle

import "github.com/narwhal-go/narwhal/internal/vllm"

// The inputs beyond leg outcomes and ticks: what a probe found, what an
// operator asked for, what a handoff restores. Every change to a Manager
// an owner makes goes through Step with one of these, so a recorded log
// of Steps and Readys replays into a fresh manager (Replay) and the
// owner's only writes are Step and Ready. The methods they dispatch to
// stay for the manager's own tests.

// Quarantine holds IID out of placement until router time Until.
type Quarantine struct {
	IID   string
	Until float64
}

// ReleaseQuarantines ends the timed holds due at Step's now (a tick does
// too); the answer's IIDs are the engines released.
type ReleaseQuarantines struct{}

// Ejection takes IID out of placement with Cause.
type Ejection struct{ IID, Cause string }

// Recover returns an ejected IID to placement (its probe passed).
type Recover struct{ IID string }

// CheckIdentity compares an observed identity with the accepted one; the
// answer's Changed is a new process, Previous the identity accepted.
type CheckIdentity struct {
	IID  string
	Seen vllm.Identity
}

// AcceptIdentity records the identity a validation accepted.
type AcceptIdentity struct {
	IID string
	ID  vllm.Identity
}

// ObserveVersion is the /version IID answered, for the build rule.
type ObserveVersion struct{ IID, Version string }

// NewProcess is IID's process start just observed (an incompatible-kv
// hold on an older process lifts).
type NewProcess struct {
	IID   string
	Start float64
}

// HoldOut holds IID out for Cause with Detail.
type HoldOut struct{ IID, Cause, Detail string }

// ReleaseHold lifts IID's hold for Cause.
type ReleaseHold struct{ IID, Cause string }

// KVRefused is a NIXL handshake refusal between Consumer and Producer
// with the hashes the consumer reported; the answer's IID is the engine
// held.
type KVRefused struct{ Consumer, Producer, LocalHash, RemoteHash string }

// BeginDrain is an operator drain of IID at wall time Wall (see
// Manager.BeginDrain); the owner captures the identity and steps
// FinishDrain.
type BeginDrain struct {
	IID       string
	Wall      float64
	DeadlineS float64
	LastLive  bool
}

// FinishDrain is the identity the drain captured, or Failure: why the
// capture failed.
type FinishDrain struct {
	IID     string
	Wall    float64
	ID      vllm.Identity
	Failure string
}

// BeginReadmit asks to validate IID at wall time Wall; the owner runs
// the gates the answer describes (Old, RequireNewer) and steps
// FinishReadmit.
type BeginReadmit struct {
	IID  string
	Wall float64
}

// FinishReadmit is the gates' outcome.
type FinishReadmit struct {
	IID    string
	Wall   float64
	Checks []Check
	Seen   vllm.Identity
}

// Note is an engine_lifecycle event the owner observed itself.
type Note struct {
	At     float64
	Action string
	Fields map[string]any
}

// Restore is a handoff document's records, ejections and process starts.
type Restore struct {
	Records []Record
	Ejected map[string]string
	Starts  map[string]float64
}

// RestoreEvents is a handoff document's events: already journalled.
type RestoreEvents struct{ Events []Event }

func (Quarantine) input()         {}
func (ReleaseQuarantines) input() {}
func (Ejection) input()           {}
func (Recover) input()            {}
func (CheckIdentity) input()      {}
func (AcceptIdentity) input()     {}
func (ObserveVersion) input()     {}
func (NewProcess) input()         {}
func (HoldOut) input()            {}
func (ReleaseHold) input()        {}
func (KVRefused) input()          {}
func (BeginDrain) input()         {}
func (FinishDrain) input()        {}
func (BeginReadmit) input()       {}
func (FinishReadmit) input()      {}
func (Note) input()               {}
func (Restore) input()            {}
func (RestoreEvents) input()      {}

// Answer is what one Step says back at once; what to do about it comes
// with the next Ready. Each input fills the fields its comment names.
type Answer struct {
	// Changed: the input changed the engine (Quarantine, Ejection, Recover,
	// NewProcess, HoldOut, ReleaseHold); CheckIdentity: a new process.
	Changed  bool
	Previous vllm.Identity // CheckIdentity: the identity accepted before
	IID      string        // KVRefused: the engine held
	IIDs     []string      // ReleaseQuarantines: the engines released
	// Old and RequireNewer are BeginReadmit's: the identity recorded
	// before the drain, and whether the gates must see a newer process.
	Old          *vllm.Identity
	RequireNewer bool
	Record       Record // the drain and readmission inputs: the engine's record after
	Err          error  // the drain and readmission inputs: a *Conflict, or the failure
}

// stepProbe applies the inputs a probe's outcome brings.
func (m *Manager) stepProbe(now float64, in Input) (Answer, bool) {
	var a Answer
	switch in := in.(type) {
	case Quarantine:
		a.Changed = m.Quarantine(in.IID, in.Until)
	case ReleaseQuarantines:
		a.IIDs = m.ReleaseQuarantines(now)
	case Ejection:
		a.Changed = m.Eject(in.IID, in.Cause)
	case Recover:
		a.Changed = m.Recovered(in.IID)
	case CheckIdentity:
		a.Changed, a.Previous = m.CheckIdentity(in.IID, in.Seen)
	case AcceptIdentity:
		m.AcceptIdentity(in.IID, in.ID)
	case ObserveVersion:
		m.ObserveVersion(in.IID, in.Version, now)
	case NewProcess:
		a.Changed = m.NewProcess(in.IID, in.Start)
	case HoldOut:
		a.Changed = m.Hold(in.IID, in.Cause, in.Detail, now)
	case ReleaseHold:
		a.Changed = m.Release(in.IID, in.Cause)
	case KVRefused:
		a.IID = m.KVRefused(in.Consumer, in.Producer, in.LocalHash, in.RemoteHash, now)
	default:
		return a, false
	}
	return a, true
}

// stepAction applies an operator's or a handoff's input.
func (m *Manager) stepAction(in Input) (Answer, bool) {
	var a Answer
	switch in := in.(type) {
	case BeginDrain:
		a.Record, a.Err = m.BeginDrain(in.IID, in.Wall, in.DeadlineS, in.LastLive)
	case FinishDrain:
		var err error
		if in.Failure != "" {
			err = captureFailed(in.Failure)
		}
		a.Record, a.Err = m.FinishDrain(in.IID, in.Wall, in.ID, err)
	case BeginReadmit:
		a.Old, a.RequireNewer, a.Record, a.Err = m.BeginReadmit(in.IID, in.Wall)
	case FinishReadmit:
		a.Record, a.Err = m.FinishReadmit(in.IID, in.Wall, in.Checks, in.Seen)
	case Note:
		m.Note(in.At, in.Action, in.Fields)
	case Restore:
		m.Restore(in.Records, in.Ejected, in.Starts)
	case RestoreEvents:
		m.RestoreEvents(in.Events)
	default:
		return a, false
	}
	return a, true
}

// captureFailed is a FinishDrain's failure as the error FinishDrain
// reports (a string in the input, so a log of inputs compares).
type captureFailed string

func (c captureFailed) Error() string { return string(c) }
