package projectconfig

import "errors"

// Errors returned by Scan.
var (
	// ErrDir: the directory to scan could not be opened as a directory. A
	// listed file that cannot be read is never an error; it is flagged
	// (ReasonReadError).
	ErrDir = errors.New("projectconfig: cannot open the directory to scan")
)

// Errors returned by Check (through *Refusal).
var (
	// ErrNotApproved: a tool reads a flagged file and the stored approval
	// is not the directory's current hash (R-PCS-12). A *Refusal matches it
	// with errors.Is.
	ErrNotApproved = errors.New("projectconfig: project configuration not approved")
)

// Errors of the readers, carried as the Detail of an unreadable file.
var (
	// errTooDeep: a node sits deeper than MaxDepth (R-PCS-20).
	errTooDeep = errors.New("nested deeper than 64 levels")
	// errSyntax: the token stream is not valid in the file's format.
	errSyntax = errors.New("syntax error")
)
