package transcript

import (
	"bufio"
	"bytes"
	"container/list"
	"errors"
	"io"
	"sync"
	"time"
)

// Cache bounds (NewCache).
const (
	// DefaultMaxFiles is the number of indexed files a Cache keeps.
	DefaultMaxFiles = 512
	// DefaultMaxBytes is the memory a Cache's indexes may hold, estimated.
	DefaultMaxBytes = 64 << 20
	// MaxRecordBytes bounds one JSONL record: a longer one is passed over
	// and counted in Activity.Unreadable (the handoff bound of R-HOF-15).
	MaxRecordBytes = 32 << 20
)

// Cache is one agent's index of the native records it has read. Each file
// (known by device and inode) keeps what was read of it: how far, the
// offset, role, time and first line of each message, and the activity
// state its records built. A later request parses only the bytes appended
// since; a file that shrank, changed inode or whose last indexed bytes
// changed is indexed again from the start. A message's text is read back
// by its offset only when a request needs it. The cache evicts the least
// recently used files beyond its file count or memory estimate.
//
// A Cache is safe for concurrent use; requests for one file are served one
// at a time.
type Cache struct {
	mu       sync.Mutex
	maxFiles int
	maxBytes int64
	files    map[fileKey]*list.Element // of *fileIndex
	lru      list.List                 // front: most recently used
	total    int64
	hints    map[hintKey][]string
}

type hintKey struct{ tool, home, id string }

// NewCache returns a cache of at most maxFiles indexed files holding about
// maxBytes of index. Zero or less selects DefaultMaxFiles and
// DefaultMaxBytes.
func NewCache(maxFiles int, maxBytes int64) *Cache {
	if maxFiles <= 0 {
		maxFiles = DefaultMaxFiles
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Cache{maxFiles: maxFiles, maxBytes: maxBytes, files: map[fileKey]*list.Element{}, hints: map[hintKey][]string{}}
}

// parseKind says how a file's records are read.
type parseKind uint8

const (
	kindClaudeMain parseKind = iota + 1 // a session transcript
	kindClaudeSub                       // a sub-agent transcript (records are sidechain)
	kindCodex                           // a rollout
)

// span is one record line of a file.
type span struct {
	off int64
	n   int32
}

// roles of an indexed message.
const (
	roleUser uint8 = iota + 1
	roleAssistant
)

// how a message's text is taken out of its record(s).
const (
	fromClaudeUser      uint8 = iota + 1 // a user record's content
	fromClaudeQueued                     // a queued_command attachment's prompt
	fromClaudeAssistant                  // the text blocks of assistant records
	fromCodexMessage                     // a response_item message's text parts
)

// msgEntry is one message of the index.
type msgEntry struct {
	span
	more  []span // further records of a merged assistant message
	role  uint8
	how   uint8
	at    int64 // Unix milliseconds; 0 when the record has no time
	first string
	msgID string // Claude message.id of an assistant message, to merge
}

func (m *msgEntry) cost() int64 { return 96 + int64(len(m.first)+len(m.msgID)) + 16*int64(len(m.more)) }

// fileIndex is what was read of one file.
type fileIndex struct {
	mu       sync.Mutex
	key      fileKey
	kind     parseKind
	consumed int64  // bytes of complete records parsed
	tail     []byte // the last bytes of the consumed region
	size     int64  // the file's size and modification time at the last update
	mtime    time.Time
	msgs     []msgEntry
	userIDs  []int32 // 1-based ids of the user messages, ascending
	// sortedAll and sortedUser are true while the messages' times never
	// decrease, so that at can be found by binary search.
	sortedAll, sortedUser bool
	skipped               int   // records over MaxRecordBytes or not JSON
	records               int64 // records parsed, over the index's life
	claude                *claudeState
	codex                 *codexState
	mem                   int64
	evicted               bool
}

func newFileIndex(key fileKey, kind parseKind) *fileIndex {
	ix := &fileIndex{key: key, kind: kind, sortedAll: true, sortedUser: true}
	switch kind {
	case kindCodex:
		ix.codex = newCodexState()
	default:
		ix.claude = newClaudeState()
	}
	return ix
}

// reset forgets everything read (a rewritten file).
func (ix *fileIndex) reset() {
	fresh := newFileIndex(ix.key, ix.kind)
	ix.consumed, ix.tail, ix.msgs, ix.userIDs = 0, nil, nil, nil
	ix.sortedAll, ix.sortedUser, ix.skipped, ix.mem, ix.records = true, true, 0, 0, 0
	ix.claude, ix.codex = fresh.claude, fresh.codex
}

// addMessage appends a message and keeps the id lists.
func (ix *fileIndex) addMessage(m msgEntry) {
	if n := len(ix.msgs); m.at == 0 || n > 0 && ix.msgs[n-1].at > m.at {
		ix.sortedAll = false
	}
	if m.role == roleUser {
		if n := len(ix.userIDs); m.at == 0 || n > 0 && ix.msgs[ix.userIDs[n-1]-1].at > m.at {
			ix.sortedUser = false
		}
		ix.userIDs = append(ix.userIDs, int32(len(ix.msgs)+1))
	}
	ix.msgs = append(ix.msgs, m)
	ix.mem += m.cost()
}

// open locates and opens src's transcript and returns its index, updated
// and locked; the caller calls release. When the file is not there, ix is
// nil and state says pending or missing.
func (c *Cache) open(src Source) (of *openedFile, ix *fileIndex, state State, err error) {
	if err := checkSource(src); err != nil {
		return nil, nil, "", err
	}
	if src.ConversationID == "" {
		return nil, nil, StatePending, nil
	}
	hk := hintKey{src.Tool, src.Home, src.ConversationID}
	c.mu.Lock()
	hint := c.hints[hk]
	c.mu.Unlock()
	var kind parseKind
	switch src.Tool {
	case ToolClaude:
		of, err = locateClaude(src.Home, src.Cwd, src.ConversationID, hint)
		kind = kindClaudeMain
	case ToolCodex:
		of, err = locateCodex(src.Home, src.ConversationID, hint)
		kind = kindCodex
	}
	if err == errNotFound {
		if src.Live {
			return nil, nil, StatePending, nil
		}
		return nil, nil, StateMissing, nil
	}
	if err != nil {
		return nil, nil, "", err
	}
	c.mu.Lock()
	if len(c.hints) > 4*c.maxFiles {
		clear(c.hints)
	}
	c.hints[hk] = of.rel
	c.mu.Unlock()
	ix, err = c.indexOf(of, kind)
	if err != nil {
		of.f.Close()
		return nil, nil, "", err
	}
	return of, ix, StateRead, nil
}

// indexOf returns of's index brought up to date, locked.
func (c *Cache) indexOf(of *openedFile, kind parseKind) (*fileIndex, error) {
	c.mu.Lock()
	var ix *fileIndex
	if el, ok := c.files[of.key]; ok {
		ix = el.Value.(*fileIndex)
		c.lru.MoveToFront(el)
	} else {
		ix = newFileIndex(of.key, kind)
		c.files[of.key] = c.lru.PushFront(ix)
	}
	c.mu.Unlock()

	ix.mu.Lock()
	before := ix.mem
	if err := ix.update(of, kind); err != nil {
		ix.reset()
		ix.mem = 0
		c.account(ix, before)
		ix.mu.Unlock()
		return nil, err
	}
	c.account(ix, before)
	return ix, nil
}

// account records ix's new memory estimate and evicts least recently used
// indexes (never ix itself) beyond the bounds.
func (c *Cache) account(ix *fileIndex, before int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ix.evicted {
		c.total += ix.mem - before
	}
	for c.lru.Len() > 1 && (c.lru.Len() > c.maxFiles || c.total > c.maxBytes) {
		el := c.lru.Back()
		old := el.Value.(*fileIndex)
		if old == ix {
			break
		}
		c.evictLocked(el)
	}
	if !ix.evicted && ix.mem > c.maxBytes {
		// Alone over the bound: serve this request, keep nothing.
		if el, ok := c.files[ix.key]; ok && el.Value.(*fileIndex) == ix {
			c.evictLocked(el)
		}
	}
}

// evictLocked drops an index; the caller holds c.mu. A request holding
// the index's lock finishes with it.
func (c *Cache) evictLocked(el *list.Element) {
	old := el.Value.(*fileIndex)
	c.lru.Remove(el)
	delete(c.files, old.key)
	c.total -= old.mem
	old.evicted = true
}

// Len returns the number of indexed files and the estimated bytes they hold.
func (c *Cache) Len() (files int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.total
}

const tailLen = 64

// update parses what was appended to the file since the last request, or
// everything again when the file was rewritten.
func (ix *fileIndex) update(of *openedFile, kind parseKind) error {
	// A rewrite is a shrink, a change of the last indexed bytes, or a new
	// modification time at the same size. (A rewrite that grows the file
	// and keeps those bytes is not seen; the tools only append.)
	rewritten := of.size < ix.consumed || (of.size == ix.size && !of.mtime.Equal(ix.mtime))
	ix.size, ix.mtime = of.size, of.mtime
	if ix.kind != kind || rewritten {
		ix.kind = kind
		ix.reset()
	} else if ix.consumed > 0 {
		got := make([]byte, len(ix.tail))
		if _, err := of.f.ReadAt(got, ix.consumed-int64(len(ix.tail))); err != nil || !bytes.Equal(got, ix.tail) {
			ix.reset()
		}
	}
	if of.size == ix.consumed {
		return nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(of.f, ix.consumed, of.size-ix.consumed), 256<<10)
	off := ix.consumed // the next unread byte
	recStart := off    // where the record being read began
	var long []byte    // a record longer than the reader's buffer
	skipping := false  // the record is over MaxRecordBytes
	for {
		chunk, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if !skipping {
				long = append(long, chunk...)
				if len(long) > MaxRecordBytes {
					skipping, long = true, nil
				}
			}
			off += int64(len(chunk))
			continue
		}
		if err == io.EOF {
			// A record without its newline is still being written: it is
			// left, from recStart, for the next request.
			break
		}
		if err != nil {
			return err
		}
		off += int64(len(chunk))
		if skipping || len(long)+len(chunk) > MaxRecordBytes+1 {
			ix.skipped++
		} else {
			rec := chunk
			if long != nil {
				rec = append(long, chunk...)
			}
			ix.record(recStart, rec[:len(rec)-1])
		}
		recStart, long, skipping = off, nil, false
	}
	if recStart > ix.consumed {
		n := min(int64(tailLen), recStart)
		tail := make([]byte, n)
		if _, err := of.f.ReadAt(tail, recStart-n); err != nil {
			return err
		}
		ix.consumed, ix.tail = recStart, tail
	}
	return nil
}

// record parses one record line (without its newline) at off.
func (ix *fileIndex) record(off int64, line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	ix.records++
	switch ix.kind {
	case kindCodex:
		ix.codexRecord(off, line)
	default:
		ix.claudeRecord(off, line)
	}
}
