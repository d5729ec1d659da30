package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cool-ai/beachd/config"
)

// TestDevQuickStart does what README.md tells a newcomer: run `beachd dev`,
// take the API key and address it prints, send testdata/dev-request.json
// with the printed curl line's request, and see the envelope arrive at the
// dev sink, signed.
func TestDevQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "dev", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "dev"))
	cmd.Env = append(os.Environ(), "BEACHD_API_KEY=")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	// Read the banner up to the curl line.
	curlRe := regexp.MustCompile(`Authorization: Bearer (\S+?)'.*`)
	urlRe := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/v1/deliveries`)
	var key, base string
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(60 * time.Second)
	var banner strings.Builder
	for key == "" || base == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("beachd dev exited:\n%s\n%s", banner.String(), stderr.String())
			}
			banner.WriteString(l + "\n")
			if m := curlRe.FindStringSubmatch(l); m != nil {
				key = m[1]
			}
			if m := urlRe.FindStringSubmatch(l); m != nil {
				base = m[1]
			}
		case <-timeout:
			t.Fatalf("no curl line in the banner:\n%s\n%s", banner.String(), stderr.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	body, err := os.ReadFile("../../testdata/dev-request.json")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", base+"/v1/deliveries", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ack, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("sample request: %d %s\nbanner:\n%s", resp.StatusCode, ack, banner.String())
	}
	var accepted struct {
		Deliveries []struct{ ID, Channel string }
	}
	json.Unmarshal(ack, &accepted)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/dev/sink")
		if err != nil {
			t.Fatal(err)
		}
		var sink struct {
			Received []struct {
				ID       string
				Verified bool
				Envelope json.RawMessage
			}
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		json.Unmarshal(raw, &sink)
		if len(sink.Received) > 0 {
			// A person reads it in a terminal: laid out, not one line.
			if !bytes.Contains(raw, []byte("\n  \"received\": [\n")) || !bytes.Contains(raw, []byte("\n        \"role\": \"agent\"")) {
				t.Errorf("/dev/sink is not laid out for reading:\n%.400s", raw)
			}
			r := sink.Received[0]
			if !r.Verified {
				t.Errorf("the dev sink could not verify the signature")
			}
			if !bytes.Contains(r.Envelope, []byte(`"response"`)) {
				t.Errorf("the sink got an envelope without its response part: %s", r.Envelope)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing reached the dev sink; accepted %s\n%s", ack, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// `beachd dev` has no email or twilio section: its own mail server and
// recorded SMS and WhatsApp receive the dev agent's inbound addresses, so
// DevInbound passes serve's check in dev, and only there.
func TestDevInboundPassesDevCheck(t *testing.T) {
	cfg := devConfig("127.0.0.1:8025", t.TempDir(), "0123456789abcdef0123", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	a := cfg.Agents[devAgentName]
	a.Inbound = config.DevInbound("agent@beachd.localhost", "+15550001111")
	cfg.Agents[devAgentName] = a
	check := func(dev bool) error {
		_, err := cfg.ValidateServe(dev)
		return err
	}
	if err := check(true); err != nil {
		t.Fatalf("dev refuses its own configuration: %v", err)
	}
	got := cfg.InboundAgents()[devAgentName]
	want := config.Inbound{Email: []string{"agent@beachd.localhost"}, SMS: []string{"+15550001111"}, WhatsApp: []string{"+15550001111"},
		Slack: []string{"im", "*"}, Allow: []string{"*"}, IdleTimeout: 24 * time.Hour, PerMinute: 10, PerHour: 100, RefuseUnknown: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dev inbound\n got %+v\nwant %+v", got, want)
	}
	err := check(false)
	for _, w := range []string{"inbound.email[0]: mail to agent@beachd.localhost is read by the email channel, which is off",
		"inbound.sms[0]: messages to +15550001111 come through Twilio", "inbound.whatsapp[0]: messages to +15550001111 come through Twilio"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("outside dev, lacks %q: %v", w, err)
		}
	}
}

// TestDevBannerNamesWhatExists: the banner points at the console's Dev
// inbox (there is no Mail screen), and its sample answer has a code of the
// length real codes have.
func TestDevBannerNamesWhatExists(t *testing.T) {
	d := startDev(t)
	var out strings.Builder
	printDevBanner(&out, d.a, strings.TrimPrefix(d.base, "http://"))
	banner := out.String()
	if !strings.Contains(banner, "the console's Dev inbox shows it, under Mail: "+d.base+"/ui/dev") || strings.Contains(banner, "Mail screen") {
		t.Errorf("the banner does not name the Dev inbox:\n%s", banner)
	}
	m := regexp.MustCompile(`body='YES (\d+)'`).FindStringSubmatch(banner)
	if m == nil || len(m[1]) != 6 {
		t.Errorf("the banner's sample code %v, want 6 digits as real codes have:\n%s", m, banner)
	}
}

// TestDevPolicyGrantsTheTourBooking: beachd dev's small-bookings policy
// grants the README tour's £120 booking and leaves testdata/dev-approval.json
// (£1,122) to be asked.
func TestDevPolicyGrantsTheTourBooking(t *testing.T) {
	cfg := devConfig("127.0.0.1:8025", t.TempDir(), "dev-test-key-0123456789", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if _, err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	set, err := cfg.Approvals.ParsePolicies(nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../testdata/dev-approval.json")
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Envelope struct {
			Parts []struct {
				Data struct {
					ToolName string         `json:"toolName"`
					Args     map[string]any `json:"args"`
				} `json:"data"`
			} `json:"parts"`
		} `json:"envelope"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	ar := req.Envelope.Parts[1].Data
	if p := set.Match(devAgentName, ar.ToolName, ar.Args, time.Now()); p != nil {
		t.Fatalf("the £1,122 sample matched %s: the tour's approval step would not be asked", p.Name)
	}
	ar.Args["totalPrice"].(map[string]any)["amount"] = 120.0
	if p := set.Match(devAgentName, ar.ToolName, ar.Args, time.Now()); p == nil || p.Name != "small-bookings" || p.Decide != "granted" {
		t.Fatalf("the £120 booking matched %+v, want small-bookings granting", p)
	}
}
