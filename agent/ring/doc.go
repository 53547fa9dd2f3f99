// Package ring keeps each run's output as a bounded, persisted sequence of
// frames in the agent's bbolt file, and streams it to any number of viewers
// that replay from a seq and then tail live (R-RC-1..9, R-ATT-1/5/6).
//
// It must never block the child's reader on a viewer: viewers are fed from
// committed frames through their own bounded queues and are dropped when they
// fall behind. The only wait in Append is bounded backpressure from the disk
// (see Ring.Append).
//
// Durability contract: a frame reaches a viewer only after the bbolt
// transaction that stores it has committed, so an agent killed at any moment
// never loses a frame that some viewer already received. Frames appended but
// not yet committed when the agent dies are lost; no viewer saw them, and
// their seq numbers are handed out again after the restart (R-RC-6 holds for
// everything a viewer can observe).
//
// Buckets (owned by this package; nothing else opens them):
//
//	ring/<run_ref>/meta      next seq, retained frame and byte counts, end state
//	ring/<run_ref>/marks     a holder's record numbers committed with the frames (AppendMark)
//	ring/<run_ref>/frames/   8-byte big-endian seq -> frame header + data
package ring
