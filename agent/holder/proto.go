package holder

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Protocol is the version of the holder protocol this build speaks. Each
// side sends a hello with it first; an agent refuses a holder whose protocol
// it does not know and leaves that holder running (issue 30).
const Protocol = 1

// Message types. Every message is [type u8][len u32 BE][payload].
const (
	mHello   = 'H' // both ways, first: JSON (hello)
	mRecord  = 'R' // holder→agent: one log record (see record)
	mInAck   = 'i' // holder→agent: u32 bytes of input written; u32 0 = stdin gone
	mAck     = 'A' // agent→holder: u8 class, u64 record number committed
	mInput   = 'I' // agent→holder: bytes for the child's stdin
	mCloseIn = 'C' // agent→holder: close the child's stdin after what was sent
	mSignal  = 'S' // agent→holder: u8 signal for the child's group
	mStop    = 'T' // agent→holder: i64 grace in ns (sessions.Process.Stop)
	// holder→agent, right after the hellos when both offered it: empty,
	// with the child's stdin descriptor as SCM_RIGHTS (none when the
	// holder has none to give). The agent then writes the child's input
	// itself, as without a holder; mInput stays for an agent that did
	// not ask.
	mStdinFD = 'F'
)

// maxMessage bounds one message's payload: a record's data is at most one
// read of the child's output (readSize) plus its header.
const maxMessage = 1 << 20

// Record kinds and the classes a record is acknowledged in. Output records
// are acknowledged per stream (the agent commits each stream's output on
// its own reader); the exit record, the last, in classCtl. The exit ends
// both streams: the holder writes it once they reached EOF (or after its
// drain timeout).
const (
	kindData = 0
	kindExit = 2

	classStdout = 0 // stdout, or the PTY
	classStderr = 1
	classCtl    = 2
	classes     = 3
)

// recordHeader: n u64, kind u8, class u8.
const recordHeader = 8 + 1 + 1

// hello is the first message of each side. The holder's carries the
// child's pid and transport; the agent's carries, per class, the last
// record number it has committed, so that the holder resends only what
// follows (no gap, no duplicate).
type hello struct {
	Protocol int `json:"protocol"`
	// Holder → agent.
	Pid int  `json:"pid,omitempty"`
	PTY bool `json:"pty,omitempty"`
	// Agent → holder.
	After [classes]uint64 `json:"after,omitempty"`
	// Version is the sender's build (the agent's version in both).
	Version string `json:"version,omitempty"`
	// StdinFD: the holder offers the child's stdin descriptor (holder →
	// agent), the agent takes it (agent → holder): mStdinFD follows.
	StdinFD bool `json:"stdin_fd,omitempty"`
}

// ErrProtocol is returned by Adopt for a holder that speaks a protocol this
// agent does not know; the holder is left running.
var ErrProtocol = errors.New("holder: unknown protocol version")

func writeMsg(w io.Writer, typ byte, payload ...[]byte) error {
	n := 0
	for _, p := range payload {
		n += len(p)
	}
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(n))
	if len(payload) == 1 && n <= 4096 {
		// One write for a small message (an echo, an ack).
		b := make([]byte, 0, 5+n)
		b = append(append(b, h[:]...), payload[0]...)
		_, err := w.Write(b)
		return err
	}
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	for _, p := range payload {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// readMsg reads one message into buf (grown as needed) and returns its
// type and payload, which aliases buf.
func readMsg(r io.Reader, buf []byte) (byte, []byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, buf, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxMessage {
		return 0, nil, buf, fmt.Errorf("holder: message of %d bytes", n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	p := buf[:n]
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, buf, err
	}
	return h[0], p, buf, nil
}

func writeHello(w io.Writer, h hello) error {
	b, _ := json.Marshal(h)
	return writeMsg(w, mHello, b)
}

func readHello(r io.Reader) (hello, error) {
	typ, p, _, err := readMsg(r, nil)
	if err != nil {
		return hello{}, err
	}
	var h hello
	if typ != mHello || json.Unmarshal(p, &h) != nil {
		return hello{}, fmt.Errorf("%w: the first message is not a hello", ErrProtocol)
	}
	if h.Protocol != Protocol {
		return h, fmt.Errorf("%w: it speaks %d, this build %d", ErrProtocol, h.Protocol, Protocol)
	}
	return h, nil
}

// encodeRecord returns a whole record message: the frame header, the
// record header and data (one copy of the child's bytes).
func encodeRecord(n uint64, kind, class byte, data []byte) []byte {
	b := make([]byte, 5+recordHeader+len(data))
	b[0] = mRecord
	binary.BigEndian.PutUint32(b[1:5], uint32(recordHeader+len(data)))
	binary.BigEndian.PutUint64(b[5:13], n)
	b[13], b[14] = kind, class
	copy(b[5+recordHeader:], data)
	return b
}

// frameRecord fills the headers of a record message read in place (its
// data after 5+recordHeader bytes), but for the record's number.
func frameRecord(msg []byte, kind, class byte) {
	msg[0] = mRecord
	binary.BigEndian.PutUint32(msg[1:5], uint32(len(msg)-5))
	msg[13], msg[14] = kind, class
}

// decodeRecord splits a record payload.
func decodeRecord(p []byte) (n uint64, kind, class byte, data []byte, err error) {
	if len(p) < recordHeader || p[9] >= classes {
		return 0, 0, 0, nil, errors.New("holder: malformed record")
	}
	return binary.BigEndian.Uint64(p[:8]), p[8], p[9], p[recordHeader:], nil
}
