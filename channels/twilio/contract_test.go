package twilio

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	openapi "github.com/twilio/twilio-go/rest/api/v2010"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
)

// The contract tests send our real requests to Prism serving Twilio's own
// OpenAPI description of the 2010 API (npm @twilio-alpha/mcp,
// twilio-oai/spec/json/twilio_api_v2010.json). Prism validates each request
// against the description and answers 422 when it does not conform, so a
// request we shape wrongly fails the test. scripts/peers/prism.sh installs
// both into .peers/node_modules.

// prismPeer finds Prism and the spec, or skips (fails under CI).
func prismPeer(t *testing.T) (prism, spec string) {
	t.Helper()
	missing := func(what string) {
		msg := "SKIPPING Twilio contract test: " + what + " (run scripts/peers/prism.sh)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node is not installed")
	}
	root, err := moduleRoot()
	if err != nil {
		missing(err.Error())
	}
	peers := filepath.Join(root, ".peers", "node_modules")
	prism = filepath.Join(peers, ".bin", "prism")
	if _, err := os.Stat(prism); err != nil {
		missing("prism is not installed in " + peers)
	}
	filepath.WalkDir(filepath.Join(peers, "@twilio-alpha", "mcp"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, filepath.Join("twilio-oai", "spec", "json", "twilio_api_v2010.json")) {
			spec = p
			return fs.SkipAll
		}
		return nil
	})
	if spec == "" {
		missing("@twilio-alpha/mcp's twilio_api_v2010.json is not installed in " + peers)
	}
	return prism, spec
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test directory")
		}
		dir = parent
	}
}

// startPrism runs `prism mock` on a free port and returns its base URL.
func startPrism(t *testing.T) string {
	prism, spec := prismPeer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var out strings.Builder
	// Without --errors: Prism still answers 422 to a request that breaks
	// the description (and 401 without credentials), but does not turn
	// Twilio's own example responses, whose relative URIs break their
	// format "uri", into 500s.
	cmd := exec.Command(prism, "mock", "-h", "127.0.0.1", "-p", fmt.Sprint(port), spec)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prism: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("prism exited:\n%s", out.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond); err == nil {
			c.Close()
			return base
		}
		if time.Now().After(deadline) {
			t.Fatalf("prism did not listen within 90s:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestContractAgainstTwilioOpenAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("contract test starts Prism; skipped with -short")
	}
	base := startPrism(t)
	client := newTestClient(t, base, 10*time.Second)
	ctx := context.Background()

	newDeliverers := func(cfg Config) (*SMS, *WhatsApp, *store.DB) {
		st := openStore(t)
		deps := Deps{Client: client, Store: st, Limiter: fastLimiter()}
		sms, err := NewSMS(cfg, deps)
		if err != nil {
			t.Fatal(err)
		}
		wa, err := NewWhatsApp(cfg, deps)
		if err != nil {
			t.Fatal(err)
		}
		return sms, wa, st
	}
	sms, wa, st := newDeliverers(testConfig())
	st.PutKV(ctx, windowKey(alice), []byte(time.Now().Format(time.RFC3339Nano)))

	check := func(t *testing.T, res *channels.Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("Twilio's contract refused our request: %v (receipt %+v)", err, channels.AsError(err).Receipt)
		}
		if !strings.HasPrefix(res.ProviderID, "SM") || res.Receipt.Meta["source"] != "twilio" {
			t.Fatalf("result = %+v", res)
		}
	}
	t.Run("sms with approval", func(t *testing.T) {
		res, err := sms.Deliver(ctx, approvalJob("dlv_c1", "sms", alice))
		check(t, res, err)
	})
	t.Run("whatsapp free-form", func(t *testing.T) {
		res, err := wa.Deliver(ctx, job("dlv_c2", "whatsapp", alice, "Your trip is booked"))
		check(t, res, err)
	})
	t.Run("whatsapp content template with buttons", func(t *testing.T) {
		cfg := testConfig()
		cfg.Templates.Approval = &render.ContentTemplate{ContentSID: "HX0123456789abcdef0123456789abcdef",
			Variables: map[string]string{"1": "{{(index .Approvals 0).Summary}}", "2": "{{(index (index .Approvals 0).Buttons 0).Payload}}"}}
		_, wa2, _ := newDeliverers(cfg)
		res, err := wa2.Deliver(ctx, approvalJob("dlv_c3", "whatsapp", alice))
		check(t, res, err)
	})
	t.Run("messaging service", func(t *testing.T) {
		cfg := testConfig()
		cfg.SMSFrom, cfg.MessagingServiceSID = "", "MG0123456789abcdef0123456789abcdef"
		sms2, _, _ := newDeliverers(cfg)
		res, err := sms2.Deliver(ctx, job("dlv_c4", "sms", alice, "hello"))
		check(t, res, err)
	})
	t.Run("maybe-sent lookup by recorded SID", func(t *testing.T) {
		j := job("dlv_c5", "sms", alice, "hello")
		j.Delivery.MaybeSent, j.Delivery.ProviderID = true, "SMaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		res, err := sms.Deliver(ctx, j)
		check(t, res, err)
		if res.Receipt.Meta["recovered"] != true {
			t.Errorf("not recovered by fetch: %+v", res.Receipt.Meta)
		}
	})
	t.Run("maybe-sent lookup by listing", func(t *testing.T) {
		// Prism's example list does not hold our body: the lookup (a
		// conforming GET) finds nothing and the message is sent.
		j := job("dlv_c6", "sms", alice, "a body Twilio's example does not have")
		j.Delivery.MaybeSent = true
		res, err := sms.Deliver(ctx, j)
		check(t, res, err)
		if res.Receipt.Meta["recovered"] == true {
			t.Errorf("recovered a message that was never sent: %+v", res.Receipt.Meta)
		}
	})
	t.Run("a malformed request is refused (the check can fail)", func(t *testing.T) {
		// No To: Twilio's description requires it.
		p := (&openapi.CreateMessageParams{}).SetFrom(ourSMS).SetBody("hi")
		_, info, err := client.CreateMessage(ctx, p)
		if err == nil {
			t.Fatal("Prism accepted a message without To: validation is off")
		}
		if _, status, _, _ := info.snapshot(); status != http.StatusUnprocessableEntity {
			t.Errorf("status %d, want 422", status)
		}
		e := classify(ctx, err, info, true)
		if e.MaybeSent {
			t.Errorf("refused request marked maybe-sent")
		}
	})
}
