package supervisor_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/olivares-dev/olivares/agent/supervisor"
)

// R-LIST-8: the preview is one line, cut at 200 runes with an ellipsis.
func TestPreview(t *testing.T) {
	if got := supervisor.Preview("  Done:\n\n the tests\tpass.  "); got != "Done: the tests pass." {
		t.Fatalf("whitespace: %q", got)
	}
	long := supervisor.Preview(strings.Repeat("é", 500))
	if utf8.RuneCountInString(long) != supervisor.PreviewRunes || !strings.HasSuffix(long, "\u2026") || !utf8.ValidString(long) {
		t.Fatalf("long text: %d runes, %q...", utf8.RuneCountInString(long), long[:10])
	}
	if got := supervisor.Preview(" \n "); got != "" {
		t.Fatalf("blank: %q", got)
	}
}
