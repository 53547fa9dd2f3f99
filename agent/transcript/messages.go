package transcript

import (
	"sort"
	"strings"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

func roleName(r uint8) string {
	if r == roleAssistant {
		return RoleAssistant
	}
	return RoleUser
}

// Messages lists a page of src's messages (GET /runs/{ref}/messages,
// R-MSG-1..6, R-MSG-8, R-MSG-12..15). A message's id is its 1-based
// position among all the session's messages, whatever the role, and never
// changes as the transcript grows (R-MSG-9). What counts as a message:
//
//   - Claude Code: what the person sent (user records holding their text,
//     and queued_command prompts delivered mid-turn), and the text of the
//     tool's assistant records, consecutive records of one API message
//     making one message. Tool results, meta and compact-summary records,
//     command output, task notifications and the "[Request interrupted by
//     user]" marker are not messages; a slash command counts as what was
//     typed ("/compact").
//   - Codex: response_item messages of role user that the person wrote (by
//     their provenance; never the environment context, instructions or
//     notifications) and of role assistant.
//
// q.ID is not read here: an id read is Message.
func (c *Cache) Messages(src Source, q MessagesQuery) (apitypes.MessagesPage, error) {
	if err := q.check(); err != nil {
		return apitypes.MessagesPage{}, err
	}
	of, ix, state, err := c.open(src)
	if err != nil {
		return apitypes.MessagesPage{}, err
	}
	page := apitypes.MessagesPage{Items: []apitypes.MessageItem{}, Transcript: state}
	if ix == nil {
		return page, nil
	}
	defer of.f.Close()
	defer ix.mu.Unlock()
	r := reader{of: of, ix: ix}

	// The candidates, as positions 0..n-1 of an id list.
	n := len(ix.msgs)
	id := func(i int) int { return i + 1 }
	sorted := ix.sortedAll
	if q.Role == RoleUser {
		n = len(ix.userIDs)
		id = func(i int) int { return int(ix.userIDs[i]) }
		sorted = ix.sortedUser
	}
	// Narrow by at (R-MSG-5): a binary search while times are ordered.
	var match []int // ids; nil means all candidates from lo
	lo := 0
	atMS := int64(0)
	if !q.At.IsZero() {
		atMS = q.At.UnixMilli()
		if q.At.Nanosecond()%1e6 != 0 {
			atMS++ // the first whole millisecond at or after At
		}
	}
	filtered := q.Q != "" || (atMS != 0 && !sorted)
	if atMS != 0 && sorted {
		lo = sort.Search(n, func(i int) bool { return ix.msgs[id(i)-1].at >= atMS })
	}
	if filtered {
		lq := strings.ToLower(q.Q)
		match = []int{}
		for i := lo; i < n; i++ {
			m := &ix.msgs[id(i)-1]
			if atMS != 0 && m.at < atMS {
				continue
			}
			if lq != "" && !containsFold(r.text(m), lq) {
				continue
			}
			match = append(match, id(i))
		}
	}
	count := n - lo
	at := func(k int) int { return id(lo + k) }
	if filtered {
		count = len(match)
		at = func(k int) int { return match[k] }
	}
	page.Total = count

	// The page: k indexes the matching ids, oldest first.
	var from, to int // [from, to)
	if q.Order == OrderAsc {
		from = 0
		if q.Cursor > 0 {
			from = sort.Search(count, func(k int) bool { return at(k) >= q.Cursor })
		}
		to = min(from+q.Limit, count)
		if to < count {
			next := at(to)
			page.Next = &next
		}
	} else {
		to = count
		if q.Cursor > 0 {
			to = sort.Search(count, func(k int) bool { return at(k) > q.Cursor })
		}
		from = max(to-q.Limit, 0)
		if from > 0 {
			next := at(from - 1)
			page.Next = &next
		}
	}
	for k := from; k < to; k++ {
		mid := at(k)
		m := &ix.msgs[mid-1]
		it := apitypes.MessageItem{ID: mid, Role: roleName(m.role), At: formatTime(m.at), FirstLine: m.first}
		if q.Text {
			t, clipped := clip(r.text(m))
			it.Text, it.Clipped = &t, clipped
		}
		page.Items = append(page.Items, it)
	}
	return page, nil
}

// Message reads one whole message by id (R-MSG-7): its text (clipped at
// MaxTextBytes, R-MSG-8), how many later messages of the same role repeat
// its first line, and the number of messages in the session. An id beyond
// them is ErrUnknownMessage.
func (c *Cache) Message(src Source, id int) (apitypes.MessageRead, error) {
	if id < 1 {
		return apitypes.MessageRead{}, errf(ErrInvalidParameter, "id: %d is not a positive integer", id) // R-MSG-16
	}
	of, ix, state, err := c.open(src)
	if err != nil {
		return apitypes.MessageRead{}, err
	}
	if ix == nil {
		return apitypes.MessageRead{}, errf(ErrUnknownMessage, "message %d does not exist: the transcript is %s", id, state)
	}
	defer of.f.Close()
	defer ix.mu.Unlock()
	if id > len(ix.msgs) {
		return apitypes.MessageRead{}, errf(ErrUnknownMessage, "message %d does not exist: the session has %d messages", id, len(ix.msgs))
	}
	r := reader{of: of, ix: ix}
	m := &ix.msgs[id-1]
	text, clipped := clip(r.text(m))
	out := apitypes.MessageRead{ID: id, Role: roleName(m.role), At: formatTime(m.at), FirstLine: m.first, Text: text,
		Clipped: clipped, Total: len(ix.msgs), Transcript: state}
	for i := id; i < len(ix.msgs); i++ {
		if o := &ix.msgs[i]; o.role == m.role && o.first == m.first {
			out.LaterSame++
		}
	}
	return out, nil
}

// reader reads message texts back from the open file by their offsets.
type reader struct {
	of  *openedFile
	ix  *fileIndex
	buf []byte
}

func (r *reader) line(s span) []byte {
	if cap(r.buf) < int(s.n) {
		r.buf = make([]byte, s.n)
	}
	b := r.buf[:s.n]
	if _, err := r.of.f.ReadAt(b, s.off); err != nil {
		return nil
	}
	return b
}

// text is a message's whole text.
func (r *reader) text(m *msgEntry) string {
	sub := r.ix.kind == kindClaudeSub
	get := func(s span) string {
		b := r.line(s)
		if b == nil {
			return ""
		}
		if m.how == fromCodexMessage {
			return codexText(b)
		}
		return claudeText(b, m.how, sub)
	}
	t := get(m.span)
	for _, s := range m.more {
		if more := get(s); more != "" {
			if t != "" {
				t += "\n"
			}
			t += more
		}
	}
	return t
}
