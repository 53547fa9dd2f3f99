package ring

import "errors"

// Errors returned when opening or addressing a ring.
var (
	// ErrBadRunRef: the run reference is empty or longer than MaxRunRefLen.
	ErrBadRunRef = errors.New("ring: run ref must be 1..512 bytes")
	// ErrBadOptions: an Options field is out of range; the message names it.
	ErrBadOptions = errors.New("ring: bad options")
)

// Errors returned while writing.
var (
	// ErrBadStream: Append was given a stream other than Stdout, Stderr or PTY.
	ErrBadStream = errors.New("ring: unknown stream")
	// ErrCommit wraps the bbolt error of a failed group commit. Append returns
	// it instead of waiting when the backpressure bound is reached while
	// commits are failing, so a broken disk never wedges the child's reader.
	ErrCommit = errors.New("ring: commit failed")
)

// Errors returned by any operation on a ring or viewer after its end of life.
var (
	// ErrClosed: the Store was closed. A viewer's stream ends without an End
	// event, as after an agent restart (R-RC-8); the client reconnects.
	ErrClosed = errors.New("ring: store closed")
	// ErrDeleted: the ring was deleted (Store.Delete).
	ErrDeleted = errors.New("ring: ring deleted")
	// ErrViewerClosed: Next was called after Viewer.Close.
	ErrViewerClosed = errors.New("ring: viewer closed")
	// ErrCorrupt: a stored record could not be decoded.
	ErrCorrupt = errors.New("ring: corrupt record")
)
