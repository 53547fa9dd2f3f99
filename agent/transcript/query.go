package transcript

import (
	"net/url"
	"strconv"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Limits of GET /runs/{ref}/messages (R-MSG-4..8, R-MSG-12..14).
const (
	// MaxQueryBytes bounds q (R-MSG-4).
	MaxQueryBytes = 256
	// DefaultLimit is the page size without limit (R-MSG-12).
	DefaultLimit = 50
	// MaxLimit bounds limit (R-MSG-6).
	MaxLimit = 200
	// MaxTextLimit bounds a text=1 page; a larger limit is clamped (R-MSG-8, R-MSG-12).
	MaxTextLimit = 50
	// MaxTextBytes is where a message text is clipped (R-MSG-8, R-MSG-14).
	MaxTextBytes = apitypes.MaxMessageText
	// ClipMark ends a clipped text (R-MSG-8).
	ClipMark = "[...]"
	// MaxFirstLineRunes bounds first_line (R-MSG-14).
	MaxFirstLineRunes = 200
)

// Role filter values.
const (
	RoleUser      = apitypes.RoleUser
	RoleAssistant = apitypes.RoleAssistant
	RoleAll       = apitypes.RoleAll
)

// Orders.
const (
	OrderAsc  = "asc"
	OrderDesc = "desc"
)

// MessagesQuery is a parsed GET /messages query (R-MSG-3..8, R-MSG-12..16).
type MessagesQuery struct {
	// Role is RoleUser (the default: what the person sent, R-MSG-3) or RoleAll.
	Role string
	// Q keeps messages that contain it, case-insensitively (R-MSG-4); "" keeps all.
	Q string
	// At, when not zero, keeps messages at or after it (R-MSG-5).
	At time.Time
	// Order is OrderAsc (default) or OrderDesc (R-MSG-6).
	Order string
	// Limit is the page size, 1..MaxLimit; with Text it is at most
	// MaxTextLimit (R-MSG-12).
	Limit int
	// Cursor, when not 0, is the id the page starts from, inclusive (R-MSG-13).
	Cursor int
	// ID, when not 0, asks for one whole message and makes every filter
	// moot (R-MSG-7).
	ID int
	// Text adds each message's text to the page (R-MSG-8).
	Text bool
}

// DefaultMessagesQuery is the query of a request without parameters.
func DefaultMessagesQuery() MessagesQuery {
	return MessagesQuery{Role: RoleUser, Order: OrderAsc, Limit: DefaultLimit}
}

// ParseMessagesQuery parses and validates the query string of GET
// /runs/{ref}/messages. Every invalid parameter of R-MSG-16 is an error
// matching ErrInvalidParameter (400) whose message names the parameter; a
// parameter given twice is invalid too. Unknown parameters are ignored.
func ParseMessagesQuery(v url.Values) (MessagesQuery, error) {
	q := DefaultMessagesQuery()
	one := func(name string) (string, bool, error) {
		vs, ok := v[name]
		if !ok {
			return "", false, nil
		}
		if len(vs) != 1 {
			return "", true, errf(ErrInvalidParameter, "%s: given %d times, at most once", name, len(vs))
		}
		return vs[0], true, nil
	}
	posInt := func(name, s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || s[0] == '+' {
			return 0, errf(ErrInvalidParameter, "%s: %q is not a positive integer", name, s) // R-MSG-16
		}
		return n, nil
	}

	if s, ok, err := one("role"); err != nil {
		return q, err
	} else if ok {
		switch s {
		case RoleUser, RoleAll:
			q.Role = s
		default:
			return q, errf(ErrInvalidParameter, "role: %q is neither user nor all", s) // R-MSG-16
		}
	}
	if s, ok, err := one("q"); err != nil {
		return q, err
	} else if ok {
		if len(s) > MaxQueryBytes {
			return q, errf(ErrInvalidParameter, "q: %d bytes, at most %d", len(s), MaxQueryBytes) // R-MSG-4
		}
		q.Q = s
	}
	if s, ok, err := one("at"); err != nil {
		return q, err
	} else if ok {
		t, perr := time.Parse(time.RFC3339Nano, s)
		if perr != nil {
			return q, errf(ErrInvalidParameter, "at: %q is not an RFC 3339 instant", s) // R-MSG-5
		}
		q.At = t
	}
	if s, ok, err := one("order"); err != nil {
		return q, err
	} else if ok {
		switch s {
		case OrderAsc, OrderDesc:
			q.Order = s
		default:
			return q, errf(ErrInvalidParameter, "order: %q is neither asc nor desc", s) // R-MSG-16
		}
	}
	if s, ok, err := one("text"); err != nil {
		return q, err
	} else if ok {
		switch s {
		case "0":
		case "1":
			q.Text = true
		default:
			return q, errf(ErrInvalidParameter, "text: %q is neither 0 nor 1", s) // R-MSG-16
		}
	}
	if s, ok, err := one("limit"); err != nil {
		return q, err
	} else if ok {
		n, perr := strconv.Atoi(s)
		if perr != nil || n < 1 || n > MaxLimit || s[0] == '+' {
			return q, errf(ErrInvalidParameter, "limit: %q is not an integer from 1 to %d", s, MaxLimit) // R-MSG-6
		}
		q.Limit = n
	}
	if q.Text && q.Limit > MaxTextLimit {
		q.Limit = MaxTextLimit // R-MSG-12: clamped, not refused
	}
	if s, ok, err := one("cursor"); err != nil {
		return q, err
	} else if ok {
		n, perr := posInt("cursor", s)
		if perr != nil {
			return q, perr
		}
		q.Cursor = n
	}
	if s, ok, err := one("id"); err != nil {
		return q, err
	} else if ok {
		n, perr := posInt("id", s)
		if perr != nil {
			return q, perr
		}
		q.ID = n
	}
	return q, nil
}

// check validates a query built in code rather than parsed.
func (q *MessagesQuery) check() error {
	if q.Role == "" {
		q.Role = RoleUser
	}
	if q.Order == "" {
		q.Order = OrderAsc
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	switch {
	case q.Role != RoleUser && q.Role != RoleAll:
		return errf(ErrInvalidParameter, "role: %q is neither user nor all", q.Role) // R-MSG-16
	case q.Order != OrderAsc && q.Order != OrderDesc:
		return errf(ErrInvalidParameter, "order: %q is neither asc nor desc", q.Order) // R-MSG-16
	case q.Limit < 1 || q.Limit > MaxLimit:
		return errf(ErrInvalidParameter, "limit: %d is not from 1 to %d", q.Limit, MaxLimit) // R-MSG-6
	case len(q.Q) > MaxQueryBytes:
		return errf(ErrInvalidParameter, "q: %d bytes, at most %d", len(q.Q), MaxQueryBytes) // R-MSG-4
	case q.Cursor < 0 || q.ID < 0:
		return errf(ErrInvalidParameter, "cursor and id are positive integers") // R-MSG-16
	}
	if q.Text && q.Limit > MaxTextLimit {
		q.Limit = MaxTextLimit
	}
	return nil
}
