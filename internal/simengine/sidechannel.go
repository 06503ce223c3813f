package simengine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// The side channel stands in for NIXL's ZMQ handshake plus the RDMA read.
// It is newline-delimited JSON over one TCP connection per transfer:
//
//	→ {"op":"get_meta_msg"}
//	← {"compatibility_hash":"…","engine_id":"…","block_size":16,"tp_size":1}
//	→ {"op":"read","remote_request_id":"…","block_ids":[…]}
//	← {"ok":true,"kv_digest":"<16 hex>","num_tokens":N,"bytes":B} | {"ok":false,"error":"…"}
//
// The consumer compares the hash and the engine id before it reads, as
// NIXL does; a successful read releases the producer's lease.

type scRequest struct {
	Op              string `json:"op"`
	RemoteRequestID string `json:"remote_request_id,omitempty"`
	BlockIDs        []int  `json:"block_ids,omitempty"`
}

type scMeta struct {
	CompatibilityHash string `json:"compatibility_hash"`
	EngineID          string `json:"engine_id"`
	BlockSize         int    `json:"block_size"`
	TPSize            int    `json:"tp_size"`
}

type scRead struct {
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
	KVDigest  string `json:"kv_digest,omitempty"`
	NumTokens int    `json:"num_tokens,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
}

const scTimeout = 5 * time.Second // D waits 5 s for P's handshake reply

func (e *Engine) acceptSideChannel() {
	defer e.wg.Done()
	for {
		c, err := e.scLn.Accept()
		if err != nil {
			return
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			stop := context.AfterFunc(e.ctx, func() { c.Close() })
			defer stop()
			defer c.Close()
			e.serveSideChannel(c)
		}()
	}
}

func (e *Engine) serveSideChannel(c net.Conn) {
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), 1<<20)
	enc := json.NewEncoder(c)
	for i := 0; i < 8 && sc.Scan(); i++ { // a transfer is two messages; bound the rest
		var req scRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			_ = enc.Encode(scRead{Error: "Failed to decode NixlHandshakePayload. This likely indicates an incompatibility between connector version."})
			return
		}
		switch req.Op {
		case "get_meta_msg":
			e.mu.Lock()
			m := scMeta{CompatibilityHash: CompatibilityHash(e.ident), EngineID: e.engineID, BlockSize: e.cfg.BlockSize, TPSize: 1}
			e.mu.Unlock()
			_ = enc.Encode(m)
		case "read":
			_ = enc.Encode(e.serveRead(req))
		default:
			_ = enc.Encode(scRead{Error: "unknown side-channel op " + strconv.Quote(req.Op)})
			return
		}
	}
}

// serveRead hands a leased prefill's KV to the consumer and frees it.
func (e *Engine) serveRead(req scRequest) scRead {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.leases[req.RemoteRequestID]
	if l == nil {
		return scRead{Error: fmt.Sprintf("engine %s holds no KV blocks for request %s (lease expired, already read, or the producer restarted)", e.engineID, req.RemoteRequestID)}
	}
	if !sameInts(l.blockIDs, req.BlockIDs) {
		return scRead{Error: fmt.Sprintf("remote_block_ids do not match the blocks engine %s holds for request %s", e.engineID, req.RemoteRequestID)}
	}
	delete(e.leases, req.RemoteRequestID)
	e.model.Release(l.modelID)
	e.signal()
	d := l.digest
	if e.faults.CorruptKV {
		d ^= 0x5a5a5a5a5a5a5a5a
	}
	return scRead{OK: true, KVDigest: fmt.Sprintf("%016x", d), NumTokens: l.numTokens, Bytes: int64(l.numTokens) * e.ident.KVBytesPerToken()}
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// remoteKV is what a decode leg pulled.
type remoteKV struct {
	digest    uint64
	numTokens int
	bytes     int64
}

// pull performs the consumer side: handshake, compatibility and identity
// checks, read. The timeout runs on the engine's clock.
func (e *Engine) pull(ctx context.Context, p decodeParams) (remoteKV, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := e.clock.NewTimer(scTimeout)
	defer t.Stop()
	go func() {
		select {
		case <-t.C():
			cancel()
		case <-ctx.Done():
		}
	}()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(p.host, strconv.Itoa(p.port)))
	if err != nil {
		return remoteKV{}, fmt.Errorf("NIXL handshake with %s:%d failed: %v", p.host, p.port, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), 1<<20)
	enc := json.NewEncoder(c)
	var meta scMeta
	if err := exchange(enc, sc, scRequest{Op: "get_meta_msg"}, &meta); err != nil {
		return remoteKV{}, fmt.Errorf("NIXL handshake with %s:%d failed: %v", p.host, p.port, err)
	}
	if local := CompatibilityHash(e.Compat()); meta.CompatibilityHash != local {
		return remoteKV{}, fmt.Errorf("NIXL compatibility hash mismatch. Local: %s, Remote: %s", local, meta.CompatibilityHash)
	}
	if meta.EngineID != p.engineID {
		//lint:ignore ST1005 the text is vLLM's own, which log scrapers match
		return remoteKV{}, fmt.Errorf("Remote NIXL agent engine ID mismatch. Expected %s, received %s.", p.engineID, meta.EngineID)
	}
	var rd scRead
	if err := exchange(enc, sc, scRequest{Op: "read", RemoteRequestID: p.requestID, BlockIDs: p.blockIDs}, &rd); err != nil {
		return remoteKV{}, fmt.Errorf("NIXL transfer from %s failed: %v", p.engineID, err)
	}
	if !rd.OK {
		return remoteKV{}, fmt.Errorf("NIXL transfer from %s failed: %s", p.engineID, rd.Error)
	}
	dg, err := strconv.ParseUint(rd.KVDigest, 16, 64)
	if err != nil {
		return remoteKV{}, fmt.Errorf("NIXL transfer from %s failed: bad digest %q", p.engineID, rd.KVDigest)
	}
	return remoteKV{digest: dg, numTokens: rd.NumTokens, bytes: rd.Bytes}, nil
}

func exchange(enc *json.Encoder, sc *bufio.Scanner, req scRequest, out any) error {
	if err := enc.Encode(req); err != nil {
		return err
	}
	if !sc.Scan() {
		if sc.Err() != nil {
			return sc.Err()
		}
		return errors.New("connection closed by peer")
	}
	return json.Unmarshal(sc.Bytes(), out)
}
