package ring

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Bucket and key names; see the package comment for the layout.
var (
	rootBucket   = []byte("ring")
	metaKey      = []byte("meta")
	marksKey     = []byte("marks")
	framesBucket = []byte("frames")
)

const (
	codecVersion   = 1
	frameHeaderLen = 1 + 4 + 1 + 8 // version, generation, stream, at (unix ns)
	metaLen        = 1 + 8 + 8 + 8 + 1
)

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

func keySeq(k []byte) (uint64, error) {
	if len(k) != 8 {
		return 0, fmt.Errorf("%w: frame key of %d bytes", ErrCorrupt, len(k))
	}
	return binary.BigEndian.Uint64(k), nil
}

// encodeFrame returns the stored record of f with data as its Data.
func encodeFrame(f *Frame, data []byte) []byte {
	v := make([]byte, frameHeaderLen+len(data))
	v[0] = codecVersion
	binary.BigEndian.PutUint32(v[1:5], f.Generation)
	v[5] = byte(f.Stream)
	binary.BigEndian.PutUint64(v[6:14], uint64(f.At.UnixNano()))
	copy(v[frameHeaderLen:], data)
	return v
}

// decodeFrame copies v: bbolt values are only valid inside their transaction.
func decodeFrame(seq uint64, v []byte) (Frame, error) {
	if len(v) < frameHeaderLen || v[0] != codecVersion {
		return Frame{}, fmt.Errorf("%w: frame %d", ErrCorrupt, seq)
	}
	return Frame{
		Seq:        seq,
		Generation: binary.BigEndian.Uint32(v[1:5]),
		Stream:     Stream(v[5]),
		At:         time.Unix(0, int64(binary.BigEndian.Uint64(v[6:14]))).UTC(),
		Data:       append([]byte(nil), v[frameHeaderLen:]...),
	}, nil
}

func frameDataLen(v []byte) int64 {
	if len(v) < frameHeaderLen {
		return 0
	}
	return int64(len(v) - frameHeaderLen)
}

// meta is the per-run record committed with every batch.
type meta struct {
	next   uint64 // next seq to assign; persisted so seq survives restarts (R-RC-6)
	frames int64  // retained frames
	bytes  int64  // retained Data bytes
	ended  bool   // End was committed and no frame followed it
	reason string // End's reason when ended
}

func encodeMeta(m meta) []byte {
	v := make([]byte, metaLen+len(m.reason))
	v[0] = codecVersion
	binary.BigEndian.PutUint64(v[1:9], m.next)
	binary.BigEndian.PutUint64(v[9:17], uint64(m.frames))
	binary.BigEndian.PutUint64(v[17:25], uint64(m.bytes))
	if m.ended {
		v[25] = 1
	}
	copy(v[metaLen:], m.reason)
	return v
}

func decodeMeta(v []byte) (meta, error) {
	if len(v) < metaLen || v[0] != codecVersion {
		return meta{}, fmt.Errorf("%w: meta", ErrCorrupt)
	}
	return meta{
		next:   binary.BigEndian.Uint64(v[1:9]),
		frames: int64(binary.BigEndian.Uint64(v[9:17])),
		bytes:  int64(binary.BigEndian.Uint64(v[17:25])),
		ended:  v[25] == 1,
		reason: string(v[metaLen:]),
	}, nil
}

// marks are, for one generation, the source marks committed with its
// frames per stream (AppendMark): what a holder numbered, so that an
// agent that restarts asks it only for what follows.
type marks struct {
	gen uint32
	m   [Request + 1]uint64 // by Stream
}

func encodeMarks(m marks) []byte {
	v := make([]byte, 4+8*len(m.m))
	binary.BigEndian.PutUint32(v, m.gen)
	for i, x := range m.m {
		binary.BigEndian.PutUint64(v[4+8*i:], x)
	}
	return v
}

func decodeMarks(v []byte) (marks, error) {
	var m marks
	if len(v) != 4+8*len(m.m) {
		return marks{}, fmt.Errorf("%w: marks", ErrCorrupt)
	}
	m.gen = binary.BigEndian.Uint32(v)
	for i := range m.m {
		m.m[i] = binary.BigEndian.Uint64(v[4+8*i:])
	}
	return m, nil
}
