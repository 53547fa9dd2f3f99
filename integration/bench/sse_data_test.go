package bench

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// TestOutputData checks the reports' decoder of output events against
// encoding/json, on what the coordinator marshals (apitypes.Output).
func TestOutputData(t *testing.T) {
	for _, data := range []string{
		"",
		"plain",
		`{"method":"item/agentMessage/delta","params":{"delta":"xxxx"}}` + "\n",
		"tab\tcr\rnl\nbs\\ quote\" slash/ <html> & \u2028 \x00\x1f é 世界 😀",
		string(bytes.Repeat([]byte("x"), 70000)),
	} {
		for _, enc := range []string{"utf8", "base64"} {
			o := apitypes.Output{Seq: 7, Generation: 1, Stream: "stdout", At: time.Now(), Data: data, Encoding: enc}
			if enc == "base64" {
				o.Data = base64.StdEncoding.EncodeToString([]byte(data))
			}
			ev, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			got, err := outputData([]byte("keep:"), ev)
			if err != nil {
				t.Fatalf("outputData(%.60q): %v", ev, err)
			}
			if want := "keep:" + data; string(got) != want {
				t.Errorf("outputData(%.60q) = %.60q, want %.60q", ev, got, want)
			}
		}
	}
}
