// Package apierr is the error both daemons hand to people: a stable
// snake_case code, an HTTP status and a sentence a person can act on
// (R-API-4). It is the one error envelope: an agent's error crosses the
// tunnel as a wire.Error, a type of this one, and the coordinator passes
// it through unchanged; the local control socket answers the same Body,
// and shared/apiclient reads it.
package apierr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Error is an API error. Its JSON body is
// {"error":{"code":...,"message":...,"request_id":...}}.
type Error struct {
	// Status is the HTTP status. An answer's body leaves it out, the
	// response's status line says it (BodyOf); a tunnel reply carries it.
	Status  int    `json:"status,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// RequestID is the id of the request that got this answer, as its
	// X-Request-Id header says (R-OBS-4): what to quote to an operator,
	// who finds the request's log lines by it. Set on the way out.
	RequestID string `json:"request_id,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Body is the JSON envelope of an error response (R-API-4).
type Body struct {
	Error *Error `json:"error"`
}

// BodyOf is the body of an answer that refuses with e: e without its
// status, with the answer's request id (R-OBS-4).
func BodyOf(e *Error, requestID string) Body {
	out := *e
	out.Status, out.RequestID = 0, requestID
	return Body{Error: &out}
}

// Write writes e as an error response, with the request id the response's
// X-Request-Id header already holds (R-OBS-4).
func Write(w http.ResponseWriter, e *Error) {
	b, _ := json.Marshal(BodyOf(e, w.Header().Get("X-Request-Id")))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(b)
}

// New returns an error with a formatted message.
func New(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// As returns the *Error inside err, or a 500 internal error that does not
// leak err's text beyond a generic sentence.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error; see the coordinator log"}
}

// Common errors, shared so that every route says the same thing.
func Unauthenticated() *Error {
	return New(http.StatusUnauthorized, "unauthenticated", "missing or unknown bearer token; pass Authorization: Bearer <token> (see olivares login)")
}

// TenantRequired is R-TEN-4's 400.
func TenantRequired() *Error {
	return New(http.StatusBadRequest, "tenant_required", "the X-Olivares-Tenant header is missing or malformed; send the tenant id, e.g. X-Olivares-Tenant: default")
}

// TenantForbidden is R-TEN-4's 403.
func TenantForbidden(tenant string) *Error {
	return New(http.StatusForbidden, "tenant_forbidden", "this credential is not a member of tenant %q", tenant)
}

// PermissionDenied is R-AUTH-3's 403.
func PermissionDenied(perm string) *Error {
	return New(http.StatusForbidden, "permission_denied", "this credential lacks %s in this tenant; ask an admin for a role that grants it", perm)
}

// NotFound is the 404 for a resource absent from the caller's tenant (R-TEN-3).
func NotFound(kind, id string) *Error {
	return New(http.StatusNotFound, "not_found", "%s %q not found", kind, id)
}

// BadRequest is a 400 for invalid input.
func BadRequest(code, format string, args ...any) *Error {
	return New(http.StatusBadRequest, code, format, args...)
}
