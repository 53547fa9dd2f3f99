// Package holder keeps a run's child alive across agent restarts (issue
// 30). A holder is `olivares-agent hold --dir DIR`, started by the agent in
// its own session and not tied to the agent's life: it starts the child
// (sessions' proc or PTY runner, so the child dies with its holder), serves
// a small versioned protocol on DIR/holder.sock (0600), passes the child's
// output to a connected agent, and while none is connected keeps it in
// DIR/spool, bounded: at the cap it stops reading, so the child blocks on
// its pipe (backpressure, never loss). It records the child's exit so that
// an exit while no agent was there is still an observed exit.
//
// The holder spawns whatever Spec it is given; isolation is a
// transformation of the Spec made before (it knows nothing of it).
//
// # Protocol
//
// Each message is [type u8][len u32 BE][payload]. Both sides send a hello
// first (JSON, with "protocol"); a side that does not know the other's
// protocol closes the connection and the holder goes on. The holder's
// output is a numbered log of records: data of one stream (stdout or PTY,
// stderr), then the exit, written once both streams ended. The agent commits data records with
// their number (ring marks) and acknowledges them per stream; the holder
// forgets a record only once acknowledged, and an agent that connects says
// the last number it committed per stream, so a reconnect after a kill -9
// gets every byte once: no gap, no duplicate. The holder ends once the
// agent acknowledges the exit record. When both hellos say stdin_fd, the
// holder then passes the child's stdin descriptor (mStdinFD): the agent
// writes input into the pipe itself.
package holder
