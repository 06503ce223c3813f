package kvevents

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The slice of ZMTP 3.0 (rfc.zeromq.org/spec/23) that vLLM's event
// publisher needs: the NULL security mechanism, READY with Socket-Type,
// multipart messages, and subscriptions sent as messages whose first byte
// is 1 (3.0) or as SUBSCRIBE commands (3.1). A PUB socket drops messages
// for a subscriber that does not keep up, as ZeroMQ does at its high-water
// mark.

const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04

	maxFrame = 64 << 20 // refuse frames over 64 MiB: no event batch is that large
)

// zconn is one ZMTP connection after its handshake.
type zconn struct {
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	peer string // the peer's Socket-Type
}

func greeting(asServer bool) []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10], g[11] = 0xff, 0x7f, 3, 0
	copy(g[12:32], "NULL")
	if asServer {
		g[32] = 1
	}
	return g
}

// handshake exchanges greetings and READY commands within timeout.
func handshake(c net.Conn, socketType string, asServer bool, timeout time.Duration) (*zconn, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	z := &zconn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}
	if _, err := z.w.Write(greeting(asServer)); err != nil {
		return nil, err
	}
	if err := z.w.Flush(); err != nil {
		return nil, err
	}
	var g [64]byte
	if _, err := io.ReadFull(z.r, g[:]); err != nil {
		return nil, fmt.Errorf("zmtp greeting: %w", err)
	}
	if g[0] != 0xff || g[9] != 0x7f || g[10] < 3 || string(bytes.TrimRight(g[12:32], "\x00")) != "NULL" {
		return nil, errors.New("zmtp greeting: peer is not ZMTP 3.x with the NULL mechanism")
	}
	if err := z.writeCommand("READY", readyProps(socketType)); err != nil {
		return nil, err
	}
	name, body, err := z.readCommand()
	if err != nil {
		return nil, err
	}
	if name != "READY" {
		return nil, fmt.Errorf("zmtp handshake: peer sent %s, want READY", name)
	}
	z.peer = readyProp(body, "Socket-Type")
	return z, nil
}

func readyProps(socketType string) []byte {
	var b []byte
	b = append(b, byte(len("Socket-Type")))
	b = append(b, "Socket-Type"...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(socketType)))
	return append(b, socketType...)
}

// readyProp finds one metadata property of a READY body, case-insensitive
// in its name as the spec asks.
func readyProp(b []byte, name string) string {
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n+4 {
			return ""
		}
		key := string(b[1 : 1+n])
		vl := int(binary.BigEndian.Uint32(b[1+n:]))
		b = b[1+n+4:]
		if len(b) < vl {
			return ""
		}
		if bytes.EqualFold([]byte(key), []byte(name)) {
			return string(b[:vl])
		}
		b = b[vl:]
	}
	return ""
}

func (z *zconn) writeFrame(flags byte, body []byte) error {
	if len(body) > 255 {
		var h [9]byte
		h[0] = flags | flagLong
		binary.BigEndian.PutUint64(h[1:], uint64(len(body)))
		if _, err := z.w.Write(h[:]); err != nil {
			return err
		}
	} else if _, err := z.w.Write([]byte{flags, byte(len(body))}); err != nil {
		return err
	}
	_, err := z.w.Write(body)
	return err
}

func (z *zconn) writeCommand(name string, data []byte) error {
	body := append([]byte{byte(len(name))}, name...)
	if err := z.writeFrame(flagCommand, append(body, data...)); err != nil {
		return err
	}
	return z.w.Flush()
}

// writeMsg sends one multipart message and flushes it.
func (z *zconn) writeMsg(frames ...[]byte) error {
	for i, f := range frames {
		var flags byte
		if i < len(frames)-1 {
			flags = flagMore
		}
		if err := z.writeFrame(flags, f); err != nil {
			return err
		}
	}
	return z.w.Flush()
}

func (z *zconn) readFrame() (byte, []byte, error) {
	flags, err := z.r.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	var size uint64
	if flags&flagLong != 0 {
		var h [8]byte
		if _, err := io.ReadFull(z.r, h[:]); err != nil {
			return 0, nil, err
		}
		size = binary.BigEndian.Uint64(h[:])
	} else {
		b, err := z.r.ReadByte()
		if err != nil {
			return 0, nil, err
		}
		size = uint64(b)
	}
	if size > maxFrame {
		return 0, nil, fmt.Errorf("zmtp: frame of %d bytes is over the %d-byte limit", size, maxFrame)
	}
	body := make([]byte, size)
	_, err = io.ReadFull(z.r, body)
	return flags, body, err
}

func (z *zconn) readCommand() (string, []byte, error) {
	flags, body, err := z.readFrame()
	if err != nil {
		return "", nil, err
	}
	if flags&flagCommand == 0 || len(body) < 1 || len(body) < 1+int(body[0]) {
		return "", nil, errors.New("zmtp: expected a command frame")
	}
	n := int(body[0])
	return string(body[1 : 1+n]), body[1+n:], nil
}

// readMsg returns the next multipart message. Commands between messages
// are handed to onCommand (nil ignores them).
func (z *zconn) readMsg(onCommand func(name string, data []byte)) ([][]byte, error) {
	var frames [][]byte
	for {
		flags, body, err := z.readFrame()
		if err != nil {
			return nil, err
		}
		if flags&flagCommand != 0 {
			if len(body) >= 1 && len(body) >= 1+int(body[0]) && onCommand != nil {
				onCommand(string(body[1:1+int(body[0])]), body[1+int(body[0]):])
			}
			continue
		}
		frames = append(frames, body)
		if flags&flagMore == 0 {
			return frames, nil
		}
	}
}

func (z *zconn) Close() error { return z.c.Close() }
