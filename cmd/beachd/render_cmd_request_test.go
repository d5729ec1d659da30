package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A delivery request file ({envelope, to}, as the README sends to POST
// /v1/deliveries) renders its envelope, to its recipient on the channel;
// it was read as an A2UI surface and refused with an A2UI error.
func TestRenderCmdDeliveryRequest(t *testing.T) {
	req := "../../testdata/dev-request.json"
	code, out, errs := renderCLI(t, "render", "--channel", "email", "--format", "mime", req)
	if code != 0 || !strings.Contains(out, "To: <you@beachd.localhost>") || !strings.Contains(out, "two direct flights") {
		t.Fatalf("email: exit %d, %s\n%.600s", code, errs, out)
	}
	if code, out, errs = renderCLI(t, "render", "--channel", "email", "--format", "mime", "--to", "bob@example.org", req); code != 0 || !strings.Contains(out, "To: <bob@example.org>") {
		t.Errorf("--to over the request's recipient: exit %d, %s\n%.300s", code, errs, out)
	}
	if code, out, errs = renderCLI(t, "render", "--channel", "sms", req); code != 0 || !strings.Contains(out, "two direct flights") {
		t.Errorf("sms: exit %d, %s\n%s", code, errs, out)
	}
	// A request that is not one says what it was read as.
	bad := writeFile(t, filepath.Join(t.TempDir(), "req.json"), `{"envelope": {"role": "agent", "parts": []}, "too": []}`)
	if code, _, errs = renderCLI(t, "render", "--channel", "sms", bad); code != 1 || !strings.Contains(errs, "delivery request") || strings.Contains(errs, "A2UI") || strings.Contains(errs, "a2ui") {
		t.Errorf("bad request: exit %d, %s", code, errs)
	}
}

// The bundled approval sample expired long ago: rendered now it is the
// expired form, and render says so and how to see it as it was sent.
func TestRenderCmdExpiredSample(t *testing.T) {
	sample := filepath.Join(sampleDir, "approval-request.json")
	code, out, errs := renderCLI(t, "render", "--channel", "sms", sample)
	if code != 0 || !strings.Contains(out, "Expired") || strings.Contains(out, "YES") ||
		!strings.Contains(errs, "approval appr_7Q2K9 expired at 2026-04-20T13:50:00Z") || !strings.Contains(errs, "--now produced") {
		t.Errorf("now: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	code, out, errs = renderCLI(t, "render", "--channel", "sms", "--now", "produced", sample)
	if code != 0 || !strings.Contains(out, "Expires in 4 hours.") || !strings.Contains(out, "Reply YES 000000 or NO 000000") || errs != "" {
		t.Errorf("--now produced: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	code, out, _ = renderCLI(t, "render", "--channel", "whatsapp", "--now", "2026-04-20T12:50:00Z", sample)
	if code != 0 || !strings.Contains(out, "Expires in 60 minutes.") || !strings.Contains(out, "[ ") {
		t.Errorf("--now time: exit %d\n%s", code, out)
	}
	if code, _, errs = renderCLI(t, "render", "--channel", "sms", "--now", "yesterday", sample); code != 2 || !strings.Contains(errs, "--now") {
		t.Errorf("bad --now: exit %d %s", code, errs)
	}
}

// Whatever the file, telling a delivery request from an envelope or a
// surface does not panic; a request it accepts has a JSON envelope, and an
// envelope (with "parts") is never taken for a request.
func FuzzUnwrapDeliveryRequest(f *testing.F) {
	if raw, err := os.ReadFile("../../testdata/dev-request.json"); err == nil {
		f.Add(raw)
	}
	f.Add([]byte(`{"envelope": {"role": "agent", "parts": []}, "to": [{"channel": "sms", "address": "+15555550100"}], "agent": "a"}`))
	f.Add([]byte(`{"parts": [], "envelope": 1}`))
	f.Add([]byte(`{"envelope": null, "to": 5}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		env, to, ok, err := unwrapDeliveryRequest(b)
		if !ok {
			if env != nil || to != nil {
				t.Fatalf("not a request, yet %q %v", env, to)
			}
			return
		}
		if err != nil {
			t.Fatalf("ok with an error: %v", err)
		}
		if !json.Valid(env) && len(env) > 0 {
			t.Fatalf("envelope %q is not JSON", env)
		}
		var probe map[string]json.RawMessage
		if json.Unmarshal(b, &probe) == nil {
			if _, has := probe["parts"]; has {
				t.Fatalf("an envelope taken for a request: %s", b)
			}
		}
		_ = recipientOn(to, "sms")
	})
}
