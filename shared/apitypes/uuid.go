package apitypes

// IsUUID reports whether s is a UUID in its 8-4-4-4-12 hex text form, the
// form of Claude session ids and Codex thread ids (real-clis.md §1.4, §2.2).
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
