package ring

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// The kill -9 test re-executes this test binary as the "agent": it appends
// frames and prints every frame its viewer received. The parent SIGKILLs it
// mid-stream and checks that every printed frame is on disk, byte for byte:
// live delivery happens only after commit.
const (
	crashChildEnv  = "OLIVARES_RING_CRASH_DB"
	crashNoSyncEnv = "OLIVARES_RING_CRASH_NOSYNC"
	crashRun       = "run_crash"
	crashKillAfter = 1500 // delivered frames before the kill
)

func crashPayload(i int) []byte {
	rng := rand.New(rand.NewPCG(uint64(i), 42))
	b := make([]byte, 1+rng.IntN(4096))
	for j := range b {
		b[j] = byte(rng.Uint32())
	}
	return b
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// TestKill9Child is the child half of TestKill9KeepsDeliveredFrames.
func TestKill9Child(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("helper process of TestKill9KeepsDeliveredFrames")
	}
	fail := func(err error) { fmt.Printf("ERR %v\n", err); os.Exit(3) }
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 5 * time.Second, NoSync: os.Getenv(crashNoSyncEnv) == "1"})
	if err != nil {
		fail(err)
	}
	s, err := Open(db, Options{MaxBytes: 1 << 30, MaxFrames: 1 << 20})
	if err != nil {
		fail(err)
	}
	r, err := s.Ring(crashRun)
	if err != nil {
		fail(err)
	}
	v := r.Subscribe(0, 1<<16)
	ahead := make(chan struct{}, 256) // keep appending while the parent reads
	go func() {
		for i := 0; ; i++ {
			ahead <- struct{}{}
			if _, err := r.Append(uint32(1+i/500), Stream(1+i%3), crashPayload(i)); err != nil {
				fail(err)
			}
		}
	}()
	out := bufio.NewWriter(os.Stdout)
	for {
		ev, err := v.Next(context.Background())
		if err != nil {
			fail(err)
		}
		if ev.Kind != EventFrame {
			fail(fmt.Errorf("unexpected %v %+v", ev.Kind, ev))
		}
		f := ev.Frame
		fmt.Fprintf(out, "SEQ %d %d %d %s\n", f.Seq, f.Generation, f.Stream, sum(f.Data))
		if err := out.Flush(); err != nil {
			fail(err)
		}
		<-ahead
	}
}

// Issue requirement: a kill -9 of the agent never loses a frame that a
// viewer already received (and R-RC-7: the ring survives an agent restart).
// NoSync is covered too: kill -9 keeps the OS page cache; power loss would not.
func TestKill9KeepsDeliveredFrames(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("in the child")
	}
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSync=%v", noSync), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.db")
			cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
			if noSync {
				cmd.Env = append(cmd.Env, crashNoSyncEnv+"=1")
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			watchdog := time.AfterFunc(testDeadline, func() { cmd.Process.Kill() })
			defer watchdog.Stop()

			type rec struct {
				gen    uint32
				stream Stream
				sum    string
			}
			got := map[uint64]rec{}
			var maxSeq uint64
			killed := false
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, "ERR ") {
					t.Fatalf("child: %s", line)
				}
				var seq uint64
				var r rec
				if _, err := fmt.Sscanf(line, "SEQ %d %d %d %s", &seq, &r.gen, &r.stream, &r.sum); err != nil {
					continue // test framework chatter
				}
				got[seq] = r
				maxSeq = max(maxSeq, seq)
				if len(got) == crashKillAfter && !killed {
					if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
					killed = true
				}
			}
			err = cmd.Wait()
			if !killed {
				t.Fatalf("child exited after %d frames: %v\n%s", len(got), err, stderr.String())
			}
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child: %v, want killed by SIGKILL", err)
			}

			db := openDB(t, path)
			defer db.Close()
			stored := 0
			err = db.View(func(tx *bbolt.Tx) error {
				fb := tx.Bucket(rootBucket).Bucket([]byte(crashRun)).Bucket(framesBucket)
				for seq, w := range got {
					v := fb.Get(seqKey(seq))
					if v == nil {
						return fmt.Errorf("delivered frame %d is not on disk", seq)
					}
					f, err := decodeFrame(seq, v)
					if err != nil {
						return err
					}
					if f.Generation != w.gen || f.Stream != w.stream || sum(f.Data) != w.sum {
						return fmt.Errorf("frame %d: stored gen %d %v %s, delivered gen %d %v %s",
							seq, f.Generation, f.Stream, sum(f.Data), w.gen, w.stream, w.sum)
					}
					stored++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// The restarted agent continues the seq line past every delivered frame.
			s, err := Open(db, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			r, err := s.Ring(crashRun)
			if err != nil {
				t.Fatal(err)
			}
			first, last := r.Range()
			if first != 1 || last < maxSeq {
				t.Fatalf("after restart: Range %d..%d, want 1..>=%d", first, last, maxSeq)
			}
			if seq := mustAppend(t, r, 99, Stdout, []byte("after restart")); seq != last+1 {
				t.Fatalf("first Append after restart: seq %d, want %d", seq, last+1)
			}
			t.Logf("delivered %d frames (max seq %d), all %d on disk; %d committed before the kill", len(got), maxSeq, stored, last)
		})
	}
}
