package router

// The handoff document is written off the request path: a state change
// (an ejection on a failed leg, say) only signals, and one writer
// goroutine writes the file. Signals that arrive while a write is pending
// coalesce into it; each write reads the state when it starts, so the last
// change is always on disk after the last write.

// stateChanged is called after every change the handoff document records.
// It never blocks. Before Start (resume in New) there is no writer yet and
// the document is written at once.
func (r *Router) stateChanged() {
	if !r.started.Load() {
		_ = r.writeHandoff()
		return
	}
	select {
	case r.stateDirty <- struct{}{}:
	default: // a write is already pending: it will see this change
	}
}

// writeStates is the handoff writer, until the router closes.
func (r *Router) writeStates(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-r.stateDirty:
			_ = r.writeHandoff()
		}
	}
}
