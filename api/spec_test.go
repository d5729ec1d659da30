package api

import (
	"fmt"
	"strings"
	"testing"
)

// A recipient on a channel that has no spec is refused at ingest with a
// problem naming the channel and the known ones, and nothing is stored.
func TestIngestRefusesUnknownChannel(t *testing.T) {
	srv, db := newTestServer(t)
	for _, ch := range []string{"telegram", "teams", "Email"} {
		code, out := do(t, srv, "POST", "/v1/deliveries", key, request(fmt.Sprintf(`[{"channel":%q,"address":"someone"}]`, ch)))
		if code != 400 {
			t.Fatalf("%s: status %d, want 400 (%v)", ch, code, out)
		}
		ps, _ := out["problems"].([]any)
		if len(ps) != 1 {
			t.Fatalf("%s: problems %v", ch, ps)
		}
		p := ps[0].(map[string]any)
		reason, _ := p["reason"].(string)
		if p["path"] != "to[0].channel" || !strings.Contains(reason, fmt.Sprintf("%q", ch)) || !strings.Contains(reason, "email, sms, whatsapp, slack, webhook") {
			t.Errorf("%s: problem %v, want one at to[0].channel naming the channel and the known ones", ch, p)
		}
	}
	if all, _ := db.ListDeliveries(t.Context(), "", "", 10); len(all) != 0 {
		t.Fatalf("stored %d deliveries", len(all))
	}
}
