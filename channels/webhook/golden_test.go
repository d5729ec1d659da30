package webhook

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestGoldenRequest pins the exact request a receiver gets for the mixed
// envelope at a fixed time: body (docs/webhooks.md) and Standard Webhooks
// headers. Refresh with -update after a deliberate change.
func TestGoldenRequest(t *testing.T) {
	clk := newClock()
	d := newDeliverer(t, clk, "https://ops.example.org/hook", func(_ *Config, ep *Endpoint) {
		ep.Consumes = []string{"llm-context"}
	})
	body, err := d.Payload(job(t, "ops", "dlv_01jqz8m4k2x9v7c3b5n6p8r0st"), "ops", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	mustSigner(t, vectorSecret).SetHeaders(h, "dlv_01jqz8m4k2x9v7c3b5n6p8r0st", clk.Now(), body)
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, body, "", "  "); err != nil {
		t.Fatal(err)
	}
	got := []byte("webhook-id: " + h.Get(HeaderID) + "\nwebhook-timestamp: " + h.Get(HeaderTimestamp) +
		"\nwebhook-signature: " + h.Get(HeaderSignature) + "\n\n" + pretty.String() + "\n")
	const path = "testdata/request.golden"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("request differs from %s (run with -update if deliberate):\n%s", path, got)
	}
}
