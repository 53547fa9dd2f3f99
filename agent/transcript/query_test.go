package transcript

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestParseMessagesQuery: the defaults (R-MSG-3, R-MSG-6, R-MSG-12), the
// text=1 clamp (R-MSG-12), and a 400 for every invalid parameter of R-MSG-16.
func TestParseMessagesQuery(t *testing.T) {
	at := time.Date(2026, 11, 20, 10, 0, 0, 500e6, time.FixedZone("", 3600))
	ok := []struct {
		q    string
		want MessagesQuery
	}{
		{"", MessagesQuery{Role: "user", Order: "asc", Limit: 50}},
		{"role=all&order=desc&limit=200", MessagesQuery{Role: "all", Order: "desc", Limit: 200}},
		{"role=user&text=0", MessagesQuery{Role: "user", Order: "asc", Limit: 50}},
		{"text=1", MessagesQuery{Role: "user", Order: "asc", Limit: 50, Text: true}},
		{"text=1&limit=200", MessagesQuery{Role: "user", Order: "asc", Limit: 50, Text: true}}, // clamped, not refused
		{"text=1&limit=7", MessagesQuery{Role: "user", Order: "asc", Limit: 7, Text: true}},
		{"limit=1&cursor=12", MessagesQuery{Role: "user", Order: "asc", Limit: 1, Cursor: 12}},
		{"id=3&role=all&q=x", MessagesQuery{Role: "all", Order: "asc", Limit: 50, ID: 3, Q: "x"}},
		{"q=" + strings.Repeat("é", 128), MessagesQuery{Role: "user", Order: "asc", Limit: 50, Q: strings.Repeat("é", 128)}}, // 256 bytes
		{"q=", MessagesQuery{Role: "user", Order: "asc", Limit: 50}},
		{"at=2026-11-20T10:00:00.5%2B01:00", MessagesQuery{Role: "user", Order: "asc", Limit: 50, At: at}},
		{"unknown=1", MessagesQuery{Role: "user", Order: "asc", Limit: 50}},
	}
	for _, tc := range ok {
		v, err := url.ParseQuery(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseMessagesQuery(v)
		if err != nil {
			t.Errorf("%q: %v, want no error", tc.q, err)
			continue
		}
		if !got.At.Equal(tc.want.At) {
			t.Errorf("%q: at %v, want %v", tc.q, got.At, tc.want.At)
		}
		got.At, tc.want.At = time.Time{}, time.Time{}
		if got != tc.want {
			t.Errorf("%q: got %+v, want %+v", tc.q, got, tc.want)
		}
	}
	bad := []struct{ q, param string }{
		{"q=" + strings.Repeat("x", 257), "q"},
		{"q=" + strings.Repeat("é", 128) + "x", "q"},
		{"limit=0", "limit"},
		{"limit=201", "limit"},
		{"limit=-1", "limit"},
		{"limit=ten", "limit"},
		{"limit=", "limit"},
		{"limit=%2B5", "limit"},
		{"limit=1e2", "limit"},
		{"text=1&limit=201", "limit"}, // out of range stays a 400 with text=1
		{"order=up", "order"},
		{"order=", "order"},
		{"order=ASC", "order"},
		{"at=2026-11-20", "at"},
		{"at=yesterday", "at"},
		{"at=", "at"},
		{"role=assistant", "role"},
		{"role=", "role"},
		{"role=ALL", "role"},
		{"text=2", "text"},
		{"text=true", "text"},
		{"text=", "text"},
		{"cursor=0", "cursor"},
		{"cursor=-3", "cursor"},
		{"cursor=1.5", "cursor"},
		{"cursor=99999999999999999999999", "cursor"},
		{"id=0", "id"},
		{"id=abc", "id"},
		{"id=", "id"},
		{"limit=5&limit=6", "limit"},
		{"role=user&role=all", "role"},
	}
	for _, tc := range bad {
		v, err := url.ParseQuery(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ParseMessagesQuery(v)
		var e *Error
		if !isErr(err, ErrInvalidParameter) || !asError(err, &e) || !strings.HasPrefix(e.Message, tc.param+":") {
			t.Errorf("%q: got %v, want a 400 invalid_parameter naming %s", tc.q, err, tc.param)
		}
	}
}

// TestMessagesQueryCheck: a query built in code gets the same defaults and
// bounds.
func TestMessagesQueryCheck(t *testing.T) {
	q := MessagesQuery{Text: true, Limit: 120}
	if err := q.check(); err != nil || q.Limit != MaxTextLimit || q.Role != RoleUser || q.Order != OrderAsc {
		t.Errorf("check: %+v, %v; want user, asc, limit 50", q, err)
	}
	for _, q := range []MessagesQuery{{Role: "bot"}, {Order: "sideways"}, {Limit: 201}, {Limit: -1}, {Q: strings.Repeat("q", 257)}, {Cursor: -1}} {
		if err := q.check(); !isErr(err, ErrInvalidParameter) {
			t.Errorf("check(%+v) = %v, want ErrInvalidParameter", q, err)
		}
	}
}
