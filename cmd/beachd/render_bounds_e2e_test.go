package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
)

// rssBound is what rendering a hostile surface may cost a process at its
// peak, start-up included (measured on the -race build the end-to-end
// tests share, which takes some 85 MiB; without the evaluation budget it
// is over 800 MiB without -race).
const rssBound = 400 << 20

// hostileSurfaceEnvelope is an envelope whose one a2ui-surface is a Text
// whose formatString names a 1 MiB string 200 times: 200 MiB of text asked
// for by a 1 MiB envelope.
func hostileSurfaceEnvelope(t *testing.T) []byte {
	t.Helper()
	surface := map[string]any{
		"createSurface":    map[string]any{"surfaceId": "s", "catalogId": "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"},
		"updateComponents": map[string]any{"surfaceId": "s", "components": []any{map[string]any{"id": "root", "component": "Text", "text": map[string]any{"call": "formatString", "args": map[string]any{"value": strings.Repeat("${/a}", 200)}}}}},
		"updateDataModel":  map[string]any{"surfaceId": "s", "value": map[string]any{"a": strings.Repeat("x", 1<<20)}},
	}
	env := map[string]any{
		"role":  "agent",
		"parts": []any{map[string]any{"data": surface, "metadata": map[string]any{"partType": "a2ui-surface"}}},
		"meta":  map[string]any{"sessionId": "sess", "turnId": "turn", "producedAt": "2026-01-01T00:00:00Z", "finalizedBy": "complete"},
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// peakRSS is the peak resident set of a running process (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the daemon's status: %v", err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// boundsDaemon is the built daemon with email (to an SMTP sink) and
// SMS (to twilioURL) configured.
func boundsDaemon(t *testing.T, twilioURL string) (*daemon, *smtptest.Server) {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	sink := &smtptest.Server{Keep: true}
	smtpPort, _ := smtptest.Start(t, sink, smtptest.Plain)
	dir := t.TempDir()
	addr := freeAddr(t)
	twilio := ""
	if twilioURL != "" {
		twilio = fmt.Sprintf(`twilio:
  account_sid: "%s"
  auth_token: "%s"
  api_base_url: "%s"
  sms_from: "+15555550199"
  timeout: 5s
`, fakeTwilioAccount, fakeTwilioToken, twilioURL)
	}
	cfg := fmt.Sprintf(`listen: %[1]s
data_dir: %[2]s
public_url: http://%[1]s
api_keys: ["%[3]s"]
log: {level: warn}
email:
  from: "Agent <agent@beachd.test>"
  smtp: {host: 127.0.0.1, port: %[4]d, tls: none, timeout: 5s}
%[5]s`, addr, filepath.Join(dir, "data"), e2eKey, smtpPort, twilio)
	cfgPath := filepath.Join(dir, "beachd.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return &daemon{t: t, bin: bin, cfg: cfgPath, base: "http://" + addr}, sink
}

func deliveryRequest(t *testing.T, env []byte, to ...map[string]string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"envelope": json.RawMessage(env), "to": to})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHostileSurfaceDaemon posts the hostile surface to the built daemon
// for an email recipient: it is refused at ingest with a problem naming
// the part, the daemon's peak memory stays bounded, and an ordinary
// envelope posted after it is delivered.
func TestHostileSurfaceDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	d, sink := boundsDaemon(t, "")
	d.start()
	defer d.stop()
	code, body, err := d.post(deliveryRequest(t, hostileSurfaceEnvelope(t), map[string]string{"channel": "email", "address": "ann@people.test"}))
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusBadRequest || !bytes.Contains(body, []byte(`"envelope.parts[0].data"`)) || !bytes.Contains(body, []byte("formatString")) {
		// Accepted: whatever became of the delivery, memory is checked below.
		t.Errorf("hostile surface: %d %s, want 400 naming envelope.parts[0].data and the formatString", code, clipBytes(body, 600))
		if code == http.StatusAccepted {
			var acc struct{ Deliveries []struct{ ID string } }
			json.Unmarshal(body, &acc)
			if len(acc.Deliveries) == 1 {
				poll.Eventually(t, 30*time.Second, "the hostile delivery to settle", func() bool {
					var v struct{ State string }
					getJSON(d.base, "/v1/deliveries/"+acc.Deliveries[0].ID, &v)
					return v.State == "sent" || v.State == "dead"
				})
			}
		}
	}
	if rss := peakRSS(t, d.cmd.Process.Pid); rss > rssBound {
		t.Errorf("daemon peak RSS %d MiB, want under %d MiB", rss>>20, rssBound>>20)
	} else {
		t.Logf("daemon peak RSS %d MiB", rss>>20)
	}
	// Still serving: an ordinary envelope goes out.
	ok := []byte(`{"role":"agent","parts":[{"text":"all well, marker-7f3a","metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t2","producedAt":"2026-01-01T00:00:00Z","finalizedBy":"complete"}}`)
	if code, body, err := d.post(deliveryRequest(t, ok, map[string]string{"channel": "email", "address": "ann@people.test"})); err != nil || code != http.StatusAccepted {
		t.Fatalf("ordinary envelope: %d %s %v", code, body, err)
	}
	poll.Eventually(t, 30*time.Second, "the ordinary mail", func() bool {
		for _, m := range sink.Messages() {
			if bytes.Contains(m.Raw, []byte("marker-7f3a")) {
				return true
			}
		}
		return false
	})
}

// TestHostileSurfaceRenderCommand runs `beachd render --channel email` on
// the hostile envelope: it fails with an error naming the bound, within
// bounded memory.
func TestHostileSurfaceRenderCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "hostile.json")
	if err := os.WriteFile(file, hostileSurfaceEnvelope(t), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "render", "--channel", "email", "--now", "2026-01-01T00:00:00Z", file)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru == nil {
		t.Fatal("no rusage")
	}
	rss := ru.Maxrss << 10 // kilobytes on Linux
	t.Logf("render: exit %v, %d bytes out, peak RSS %d MiB; stderr: %s", runErr, stdout.Len(), rss>>20, clipBytes(stderr.Bytes(), 400))
	if rss > rssBound {
		t.Errorf("beachd render peak RSS %d MiB, want under %d MiB", rss>>20, rssBound>>20)
	}
	if runErr == nil || !strings.Contains(stderr.String(), "formatString") || !strings.Contains(stderr.String(), "MiB") {
		t.Errorf("beachd render: exit %v, %d bytes of output; want a failure naming the formatString and its bound; stderr:\n%s", runErr, stdout.Len(), clipBytes(stderr.Bytes(), 600))
	}
	if stdout.Len() > 4<<20 {
		t.Errorf("beachd render wrote %d bytes", stdout.Len())
	}
}

// TestLongSMSTextDeliveredCut posts a 1.2 MB response to an SMS recipient
// through the API: it is accepted, delivered to Twilio (Prism serving
// Twilio's OpenAPI description) cut to the SMS cap with a link to the full
// message, and the link shows the message to its end.
func TestLongSMSTextDeliveredCut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	prism := twiliotest.StartPrism(t, "long SMS test's Twilio peer", twiliotest.SpecMessages)
	tw := startTwilioRecorder(t, prism)
	d, _ := boundsDaemon(t, tw.URL)
	d.start()
	defer d.stop()
	var b strings.Builder
	b.WriteString("Start-9c1e of a long answer.\n\n")
	for b.Len() < 1_200_000 {
		fmt.Fprintf(&b, "Paragraph %d of the report: the figures are in order and nothing needs your attention.\n\n", b.Len())
	}
	b.WriteString("The end-4d2b.")
	text, _ := json.Marshal(b.String())
	env := []byte(`{"role":"agent","parts":[{"text":` + string(text) + `,"metadata":{"partType":"response"}}],"meta":{"sessionId":"s","turnId":"t","producedAt":"2026-01-01T00:00:00Z","finalizedBy":"complete"}}`)
	const to = "+15555550123"
	code, body, err := d.post(deliveryRequest(t, env, map[string]string{"channel": "sms", "address": to}))
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("long SMS: %d %s %v", code, clipBytes(body, 600), err)
	}
	var acc struct{ Deliveries []struct{ ID string } }
	if err := json.Unmarshal(body, &acc); err != nil || len(acc.Deliveries) != 1 {
		t.Fatalf("202 body %s: %v", body, err)
	}
	var del struct {
		State, DeadReason, LastError string
	}
	poll.Eventually(t, 30*time.Second, "the SMS delivery to settle", func() bool {
		getJSON(d.base, "/v1/deliveries/"+acc.Deliveries[0].ID, &del)
		return del.State == "sent" || del.State == "dead"
	})
	if del.State != "sent" {
		t.Fatalf("delivery %s: %s %s\n%s", del.State, del.DeadReason, del.LastError, d.stderr)
	}
	sent := tw.Sent("Start-9c1e")
	if len(sent) != 1 {
		t.Fatalf("%d messages at Twilio, want 1 (refused: %v)", len(sent), tw.Refused())
	}
	sms := sent[0].Body
	if n := utf8.RuneCountInString(sms); n > 1600 {
		t.Errorf("SMS of %d characters", n)
	}
	m := regexp.MustCompile(`Full message: (http://\S+/m/\S+)`).FindStringSubmatch(sms)
	if m == nil {
		t.Fatalf("the SMS has no full-message link:\n%s", sms)
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(page, []byte("Start-9c1e")) || !bytes.Contains(page, []byte("The end-4d2b.")) {
		t.Errorf("full-message page: %d, %d bytes, start %v, end %v", resp.StatusCode, len(page),
			bytes.Contains(page, []byte("Start-9c1e")), bytes.Contains(page, []byte("The end-4d2b.")))
	}
}

func clipBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// TestHostileSurfaceStoredEarlier is the crash loop: the hostile surface
// already in the store (accepted before ingest checked surfaces) is
// rendered when the daemon starts. The delivery is dead with the reason,
// at once, and the daemon's memory stays bounded.
func TestHostileSurfaceStoredEarlier(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	d, sink := boundsDaemon(t, "")
	d.start() // creates the store
	d.stop()
	raw, err := os.ReadFile(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	dataDir := regexp.MustCompile(`(?m)^data_dir: (\S+)$`).FindSubmatch(raw)
	if dataDir == nil {
		t.Fatalf("no data_dir in %s", raw)
	}
	db, err := bolt.Open(filepath.Join(string(dataDir[1]), "beachd.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Ingest(t.Context(), store.Ingest{Envelope: hostileSurfaceEnvelope(t), Source: "test",
		Deliveries: []store.NewDelivery{{Channel: "email", To: "ann@people.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	d.start()
	defer d.stop()
	var del struct{ State, DeadReason string }
	poll.Eventually(t, 30*time.Second, "the stored hostile delivery to settle", func() bool {
		getJSON(d.base, "/v1/deliveries/"+res.Deliveries[0].ID, &del)
		return del.State == "sent" || del.State == "dead"
	})
	if del.State != "dead" || !strings.Contains(del.DeadReason, `surface "s", component "root": formatString asks for more than 16 MiB`) {
		t.Errorf("delivery %s: %q, want dead for the surface's budget", del.State, del.DeadReason)
	}
	if n := len(sink.Messages()); n != 0 {
		t.Errorf("%d mails sent", n)
	}
	if rss := peakRSS(t, d.cmd.Process.Pid); rss > rssBound {
		t.Errorf("daemon peak RSS %d MiB, want under %d MiB", rss>>20, rssBound>>20)
	} else {
		t.Logf("daemon peak RSS %d MiB", rss>>20)
	}
}
