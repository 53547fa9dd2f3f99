// Package state opens the agent's one bbolt file. Each package that keeps
// data there owns its buckets and is handed the *bbolt.DB; nothing else
// opens the file, and no other process does (R-ARCH-3).
package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// File is the bbolt file's name in the state dir.
const File = "agent.db"

// ErrLocked: another process (a running agent) holds the file.
var ErrLocked = errors.New("state: another olivares-agent holds the state file")

// Open opens (creating) the state file in dir, waiting at most 1 s for its
// lock.
func Open(dir string) (*bbolt.DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, File)
	db, err := bbolt.Open(p, 0o600, &bbolt.Options{Timeout: time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (stop the agent first)", ErrLocked, p)
	}
	if err != nil {
		return nil, fmt.Errorf("state: open %s: %w", p, err)
	}
	return db, nil
}

// Exists reports whether dir has a state file.
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, File))
	return err == nil
}
