package codexsup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

// MaxTurnsPage is R-CX-TRN-2: persisted turns per transcript page.
const MaxTurnsPage = 20

// turnsCursor is an opaque transcript cursor: Codex's cursor and the
// direction it is valid for (a backwards cursor needs the opposite sort).
type turnsCursor struct {
	Native string `json:"c"`
	Dir    string `json:"d"` // desc: older turns; asc: newer turns
}

// Turns reads one transcript page with thread/turns/list, items "full", at
// most 20 turns, newest first (R-CX-TRN-1..3). The serialized page is
// returned, or tooLarge when it would pass proto.MaxCodexPage: then nothing
// of it leaves the node, and the cursors around it are given so that the
// client can go on (R-CX-TRN-5/6).
func (s *Service) Turns(ctx context.Context, p proto.CodexTurnsList) (page []byte, tooLarge *proto.CodexPageTooLargeInfo, err error) {
	if err := s.available(); err != nil {
		return nil, nil, err
	}
	if !cliruntime.IsUUID(p.ThreadID) {
		return nil, nil, refusal.New(ErrBadThreadId, "thread id %q is not a Codex thread id", p.ThreadID)
	}
	cur := turnsCursor{Dir: "desc"}
	if err := decodeCursor(p.Cursor, &cur); err != nil || (cur.Dir != "desc" && cur.Dir != "asc") || (p.Cursor != "" && cur.Native == "") {
		return nil, nil, errBadCursor
	}
	tp := turnsParams{ThreadID: p.ThreadID, Limit: MaxTurnsPage, ItemsView: "full", SortDirection: cur.Dir}
	if cur.Native != "" {
		tp.Cursor = &cur.Native
	}
	var res struct {
		Data            json.RawMessage `json:"data"`
		NextCursor      *string         `json:"nextCursor"`
		BackwardsCursor *string         `json:"backwardsCursor"`
	}
	err = s.conn.Call(ctx, "thread/turns/list", tp, &res)
	var big *LineTooLargeError
	if errors.As(err, &big) {
		next, back := ourCursors(cur.Dir, strp(big.NextCursor), strp(big.BackwardsCursor))
		return nil, &proto.CodexPageTooLargeInfo{Bytes: big.Bytes, NextCursor: next, BackwardsCursor: back}, nil
	}
	if err != nil {
		return nil, nil, s.codexErr("thread/turns/list", err)
	}
	turns := res.Data
	if len(turns) == 0 || turns[0] != '[' {
		turns = json.RawMessage("[]")
	}
	if cur.Dir == "asc" {
		// Every page reads newest first.
		var items []json.RawMessage
		if err := json.Unmarshal(turns, &items); err != nil {
			return nil, nil, s.codexErr("thread/turns/list", err)
		}
		slices.Reverse(items)
		turns = joinArray(items)
	}
	next, back := ourCursors(cur.Dir, res.NextCursor, res.BackwardsCursor)
	out := assemblePage(apitypes.CodexTurnsPage{Host: s.o.NodeID, ThreadID: p.ThreadID, NextCursor: next, BackwardsCursor: back}, turns)
	if len(out) > s.maxPage {
		return nil, &proto.CodexPageTooLargeInfo{Bytes: int64(len(out)), NextCursor: next, BackwardsCursor: back}, nil
	}
	return out, nil, nil
}

// assemblePage writes page with turns, Codex's own bytes, in place: a
// 20 MiB page is not re-encoded (BenchmarkPageAssembly).
func assemblePage(page apitypes.CodexTurnsPage, turns json.RawMessage) []byte {
	page.Turns = nil
	head, _ := json.Marshal(page) // {"host":…,"thread_id":…,"turns":null,…}
	i := bytes.Index(head, []byte(`"turns":null`))
	out := make([]byte, 0, len(head)+len(turns))
	out = append(out, head[:i+len(`"turns":`)]...)
	out = append(out, turns...)
	return append(out, head[i+len(`"turns":null`):]...)
}

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ourCursors maps Codex's cursors of a page read in dir to ours: next
// leads to older turns, backwards to newer ones.
func ourCursors(dir string, next, back *string) (older, newer string) {
	enc := func(c *string, d string) string {
		if c == nil || *c == "" {
			return ""
		}
		return encodeCursor(turnsCursor{Native: *c, Dir: d})
	}
	if dir == "asc" {
		return enc(back, "desc"), enc(next, "asc")
	}
	return enc(next, "desc"), enc(back, "asc")
}

func joinArray(items []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteByte(']')
	return b.Bytes()
}
