package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// codeDLPRefused is the node's code for a workspace whose DLP posture
// refuses file reads (R-DIFF-5).
const codeDLPRefused = "dlp_refused"

// diffAPI serves a run's diff against its base (R-DIFF).
type diffAPI struct{ *core }

func (s *diffAPI) routes() []Route {
	return []Route{
		// R-AUTH-4: the run's read permission.
		{http.MethodGet, Base + "/runs/:ref/diff", auth.PermRunRead, s.diff, nil},
		{http.MethodGet, Base + "/runs/:ref/diff/file", auth.PermRunRead, s.diffFile, query("path")},
		{http.MethodGet, Base + "/runs/:ref/diff/uncommitted", auth.PermRunRead, s.uncommitted, nil},
	}
}

// dlpAudit audits a DLP refusal like a workspace file read (R-DIFF-5,
// Q-22) and returns the refusal.
func (s *diffAPI) dlpAudit(c echo.Context, r apitypes.Run, path string, err error) error {
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != codeDLPRefused {
		return err
	}
	e := s.auditEntry(c, apitypes.AuditWorkspaceFileRead, r.RunRef)
	e.Target.WorkspaceRef = r.WorkspaceRef
	detail := map[string]any{"refused": true, "reason": codeDLPRefused}
	if path != "" {
		// A path the caller asked for, not file contents (R-AUD-3).
		detail["path"] = path
	}
	e.Detail = mustJSON(detail)
	if _, aerr := s.o.Store.AppendAudit(c.Request().Context(), e); aerr != nil {
		return aerr
	}
	return err
}

// diff is GET /runs/{ref}/diff (R-DIFF-1, R-DIFF-2, R-DIFF-5, R-DIFF-6).
func (s *diffAPI) diff(c echo.Context) error {
	var out apitypes.Diff
	r, err := s.runCall(c, proto.OpRunDiff, nil, &out, callTimeout)
	if err != nil {
		return s.dlpAudit(c, r, "", err)
	}
	return c.JSON(http.StatusOK, out)
}

// diffFile is GET /runs/{ref}/diff/file?path= (R-DIFF-3, R-DIFF-5,
// R-DIFF-7, R-DIFF-8).
func (s *diffAPI) diffFile(c echo.Context) error {
	qp := c.QueryParams()
	path := qp.Get("path")
	if path == "" {
		return apierr.BadRequest("path_required", "the path query parameter is required: the file to compare")
	}
	var out apitypes.FileDiff
	r, err := s.runCall(c, proto.OpRunDiffFile, proto.RunDiffFile{Path: path}, &out, callTimeout)
	if err != nil {
		return s.dlpAudit(c, r, path, err)
	}
	return c.JSON(http.StatusOK, out)
}

// uncommitted is GET /runs/{ref}/diff/uncommitted (R-DIFF-10, R-DIFF-5).
func (s *diffAPI) uncommitted(c echo.Context) error {
	var out apitypes.UncommittedDiff
	r, err := s.runCall(c, proto.OpRunUncommitted, nil, &out, callTimeout)
	if err != nil {
		return s.dlpAudit(c, r, "", err)
	}
	return c.JSON(http.StatusOK, out)
}
