package enroll

import (
	"encoding/json"
	"fmt"
)

func unmarshal(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("enroll: bad reply: %w", err)
	}
	return nil
}
