package transcript

import (
	"bytes"
	"encoding/json"

	"github.com/olivares-dev/olivares/agent/internal/jsonscan"
)

// topString returns the value of key among the top-level members of the
// JSON object in b, when that value is a string without escapes. It scans
// only as far as the key (agent/internal/jsonscan, the agent's one JSON
// peek), without allocating, so that the records and frames nobody needs
// (api-request blobs, stream deltas) are passed over at the cost of a byte
// scan instead of a decode. ok is false when b is not an object, the key is
// absent or its value is not a plain string.
func topString(b []byte, key string) (val []byte, ok bool) { return topStringN(b, key, -1) }

// topStringN is topString looking at no more than the first n members (all
// of them when n < 0): a frame's kind sits in its first members, and a
// frame that is not wanted is then left after a few bytes.
func topStringN(b []byte, key string, n int) (val []byte, ok bool) {
	jsonscan.Members(b, func(k, v []byte) bool {
		match := string(k) == key
		if !match && bytes.IndexByte(k, '\\') >= 0 {
			// A key written with escapes (no tool does): decode it.
			var ks string
			match = json.Unmarshal(append(append([]byte{'"'}, k...), '"'), &ks) == nil && ks == key
		}
		if match {
			if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
				val, ok = v[1:len(v)-1], true
			}
			return false
		}
		n--
		return n != 0
	})
	return val, ok
}

// firstMember returns the key of the first member of the JSON object in b
// and, when it is a plain string, its value.
func firstMember(b []byte) (key, val []byte, ok bool) {
	jsonscan.Members(b, func(k, v []byte) bool {
		key, ok = k, true
		if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
			val = v[1 : len(v)-1]
		}
		return false
	})
	return key, val, ok
}
