package transcript

import "errors"

// isErr reports whether err matches the sentinel.
func isErr(err error, sentinel *Error) bool { return err != nil && errors.Is(err, sentinel) }
