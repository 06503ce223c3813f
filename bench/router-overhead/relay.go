package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// The relay is the floor any router could reach: a two-leg proxy that
// does only what disaggregation itself needs — the prefill leg, its KV
// parameters handed to the decode leg, the decode leg's bytes copied to
// the client as they arrive — with no admission, sizing, placement,
// journal, metrics, retries or validation beyond parsing the body. It
// runs as its own process (this binary with -relay-prefill and
// -relay-decode) so its CPU and RSS are accounted as the router's are.

// maxRelayBody bounds a client body the relay reads.
const maxRelayBody = 1 << 20

// serveRelay serves the relay over one prefill and one decode engine on a
// free loopback port until the process is signalled. It logs its address
// as narwhal-serve does, so routerProc finds it the same way.
func serveRelay(prefill, decode string) error {
	tr := &http.Transport{MaxIdleConns: 8192, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second}
	rl := &relay{hc: &http.Client{Transport: tr}, prefill: prefill, decode: decode}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	line, _ := json.Marshal(map[string]string{"level": "INFO", "msg": "relay listening", "addr": ln.Addr().String()})
	fmt.Fprintf(os.Stderr, "%s\n", line)
	return http.Serve(ln, rl)
}

type relay struct {
	hc              *http.Client
	prefill, decode string
}

func (rl *relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/completions" {
		http.Error(w, "the relay serves POST /v1/completions only", http.StatusNotFound)
		return
	}
	var req map[string]json.RawMessage
	if err := json.NewDecoder(io.LimitReader(r.Body, maxRelayBody)).Decode(&req); err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	kv, err := rl.prefillLeg(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req["kv_transfer_params"] = kv
	b, _ := json.Marshal(req)
	resp, err := rl.hc.Post(rl.decode+"/v1/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		http.Error(w, "decode: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	copyFlushing(w, resp.Body)
}

// prefillLeg runs the request's prefill (one token, not streamed, the KV
// kept for a remote decode) and returns the engine's kv_transfer_params.
func (rl *relay) prefillLeg(req map[string]json.RawMessage) (json.RawMessage, error) {
	leg := make(map[string]json.RawMessage, len(req)+1)
	for k, v := range req {
		leg[k] = v
	}
	leg["max_tokens"], leg["stream"] = json.RawMessage("1"), json.RawMessage("false")
	leg["kv_transfer_params"] = json.RawMessage(`{"do_remote_decode":true}`)
	b, _ := json.Marshal(leg)
	resp, err := rl.hc.Post(rl.prefill+"/v1/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("prefill: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		KV json.RawMessage `json:"kv_transfer_params"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("prefill: status %d %v", resp.StatusCode, err)
	}
	return out.KV, nil
}

// copyFlushing copies src to w, flushing after every read so each event
// reaches the client when the engine sent it.
func copyFlushing(w http.ResponseWriter, src io.Reader) {
	f, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// startRelay starts this binary as the relay over prefill and decode.
func startRelay(prefill, decode string) (*routerProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return startProc("relay", self, "-relay-prefill", prefill, "-relay-decode", decode)
}
