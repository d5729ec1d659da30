package twilio

import (
	"context"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	openapi "github.com/twilio/twilio-go/rest/api/v2010"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store/bolt"
)

// The contract tests send our real requests to Prism serving Twilio's own
// OpenAPI descriptions of the 2010 API and of the Content API (npm
// @twilio-alpha/mcp, twilio-oai/spec/json/twilio_api_v2010.json and
// twilio_content_v1.json). Prism validates each request against the
// description and answers 422 when it does not conform, so a request we
// shape wrongly fails the test. scripts/peers/prism.sh installs Prism and
// the package into .peers/node_modules (or $BEACHD_PEERS/node_modules).

// startPrism serves the named Twilio description (twiliotest.SpecMessages
// or SpecContent) and returns its base URL.
func startPrism(t *testing.T, spec string) string {
	t.Helper()
	return twiliotest.StartPrism(t, "Twilio contract test", spec)
}

func TestContractAgainstTwilioOpenAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("contract test starts Prism; skipped with -short")
	}
	base := startPrism(t, twiliotest.SpecMessages)
	client := newTestClient(t, base, 10*time.Second)
	ctx := context.Background()

	newDeliverers := func(cfg Config) (*SMS, *WhatsApp, *bolt.DB) {
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
	t.Run("whatsapp window template from an agent's number", func(t *testing.T) {
		cfg := testConfig()
		cfg.WhatsAppNumbers = []string{"+15550004444"}
		cfg.WindowTemplate = "HX0123456789abcdef0123456789abcdef"
		_, wa3, _ := newDeliverers(cfg)
		j := job("dlv_c7", "whatsapp", alice, "held answer")
		j.Delivery.Extra = map[string]string{envelope.ExtraTemplate: "window", envelope.ExtraFrom: "+15550004444"}
		res, err := wa3.Deliver(ctx, j)
		check(t, res, err)
	})
	t.Run("sms from an agent's number", func(t *testing.T) {
		cfg := testConfig()
		cfg.SMSNumbers = []string{"+15550003333"}
		sms3, _, _ := newDeliverers(cfg)
		j := job("dlv_c8", "sms", alice, "an answer")
		j.Delivery.Extra = map[string]string{envelope.ExtraFrom: "+15550003333"}
		res, err := sms3.Deliver(ctx, j)
		check(t, res, err)
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

// countingTransport counts the requests to each path.
type countingTransport struct {
	mu    sync.Mutex
	paths map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.paths[r.Method+" "+r.URL.Path]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[key]
}

// TestContentContractAgainstTwilioOpenAPI sends the Content API request
// that creates the approval quick-reply content to Prism serving Twilio's
// Content API description, and the message that uses it to Prism serving
// the Messages API description: both must conform.
func TestContentContractAgainstTwilioOpenAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("contract test starts Prism; skipped with -short")
	}
	msgs, content := startPrism(t, twiliotest.SpecMessages), startPrism(t, twiliotest.SpecContent)
	ct := &countingTransport{paths: map[string]int{}}
	client, err := NewClient(ClientConfig{AccountSID: testAccount, AuthToken: testToken, APIBaseURL: msgs, ContentBaseURL: content,
		Timeout: 10 * time.Second, Transport: ct})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	buttons := []render.Button{{Title: "Approve", Payload: "apr_1:n0nce"}, {Title: "Deny", Payload: "apr_1:n0nce2"}}

	t.Run("create the quick-reply content", func(t *testing.T) {
		req, key := quickContent(buttons)
		c, info, err := client.CreateContent(ctx, req)
		if err != nil {
			_, status, _, body := info.snapshot()
			t.Fatalf("Twilio's Content API description refused our request: %v (HTTP %d %s)", err, status, body)
		}
		if !contentSID.MatchString(deref(c.Sid)) || !strings.HasPrefix(key, "twilio-content/quick-reply/") {
			t.Errorf("sid %q key %q", deref(c.Sid), key)
		}
	})
	t.Run("an approval on whatsapp creates it once and sends it", func(t *testing.T) {
		st := openStore(t)
		openWindow(t, st, alice)
		wa, err := NewWhatsApp(testConfig(), Deps{Client: client, Store: st, Limiter: fastLimiter()})
		if err != nil {
			t.Fatal(err)
		}
		before := ct.count("POST /v1/Content")
		for _, id := range []string{"dlv_q1", "dlv_q2"} {
			res, err := wa.Deliver(ctx, approvalJob(id, "whatsapp", alice))
			if err != nil {
				t.Fatalf("Twilio's contract refused our request: %v (receipt %+v)", err, channels.AsError(err).Receipt)
			}
			if !strings.HasPrefix(res.ProviderID, "SM") {
				t.Fatalf("result = %+v", res)
			}
		}
		if n := ct.count("POST /v1/Content") - before; n != 1 {
			t.Errorf("%d Content API creations for two approvals, want 1", n)
		}
		_, key := quickContent(buttons)
		if v, ok, _ := st.GetKV(ctx, key); !ok || !contentSID.Match(v) {
			t.Errorf("content SID not kept: %q %v", v, ok)
		}
	})
	t.Run("a malformed content request is refused (the check can fail)", func(t *testing.T) {
		req, _ := quickContent(buttons)
		req.Types.TwilioQuickReply.Actions[0].Type = "" // the description requires it
		_, info, err := client.CreateContent(ctx, req)
		if err == nil {
			t.Fatal("Prism accepted a quick-reply action without its type: validation is off")
		}
		if _, status, _, _ := info.snapshot(); status != http.StatusUnprocessableEntity {
			t.Errorf("status %d, want 422", status)
		}
	})
}
