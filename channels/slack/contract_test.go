package slack

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/slack/slacktest"
)

// The contract tests send beachd's real requests to Prism serving Slack's
// own OpenAPI description of the Web API (testdata/slack-api, relaxed only
// in the token parameter: slacktest.StartPrism). Prism answers 422 to a
// request that breaks the description, so a request we shape wrongly fails
// the test.
func TestContractAgainstSlackOpenAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("contract test starts Prism; skipped with -short")
	}
	base := slacktest.StartPrism(t)
	ct := &countingTransport{}
	client := newClient(t, base, ct)
	ctx := context.Background()
	st := openStore(t)
	s, err := NewSender(Config{}, client, st, newRenderer(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, res *channels.Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("Slack's description refused our request: %v (receipt %+v)", err, channels.AsError(err).Receipt)
		}
		if !strings.Contains(res.ProviderID, "/") || res.Receipt.Meta["source"] != "slack" {
			t.Fatalf("result = %+v", res)
		}
	}
	t.Run("a result to a channel", func(t *testing.T) {
		res, err := s.Deliver(ctx, job("dlv_c1", "C0123ABCD", "Your trip is booked & paid: <!channel>"))
		check(t, res, err)
	})
	t.Run("an approval with buttons to a user", func(t *testing.T) {
		res, err := s.Deliver(ctx, approvalJob("dlv_c2", "U012AB3CD"))
		check(t, res, err)
	})
	t.Run("an answer in a thread", func(t *testing.T) {
		j := job("dlv_c3", "C0123ABCD", "Here is what I found.")
		j.Delivery.Extra = map[string]string{ExtraThreadTS: "1700000000.000100"}
		res, err := s.Deliver(ctx, j)
		check(t, res, err)
	})
	t.Run("an email address is looked up once", func(t *testing.T) {
		for _, id := range []string{"dlv_c4", "dlv_c5"} {
			res, err := s.Deliver(ctx, job(id, "alice@example.org", "hello"))
			check(t, res, err)
		}
		if n := ct.count("POST /users.lookupByEmail"); n != 1 {
			t.Errorf("users.lookupByEmail called %d times, want once", n)
		}
		if id, ok, _ := NewResolver(nil, st).Known(ctx, "Alice@Example.org"); !ok || id == "" {
			t.Errorf("resolved id not kept: %q %v", id, ok)
		}
	})
	t.Run("the message is updated and a note shown", func(t *testing.T) {
		m, err := DecidedMessage("Book BA2043 for 6 people", "granted", "Alice (U012AB3CD)", "", testNow())
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Update(ctx, "C0123ABCD", "1700000000.000100", m); err != nil {
			t.Fatalf("chat.update refused: %v", err)
		}
		if err := client.Ephemeral(ctx, "C0123ABCD", "U012AB3CD", "Already approved."); err != nil {
			t.Fatalf("chat.postEphemeral refused: %v", err)
		}
	})
	t.Run("the token goes as a bearer", func(t *testing.T) {
		ct.mu.Lock()
		defer ct.mu.Unlock()
		for _, a := range ct.auth {
			if a != "Bearer "+testToken {
				t.Fatalf("Authorization %q", a)
			}
		}
	})
	t.Run("a malformed request is refused (the check can fail)", func(t *testing.T) {
		// No channel: Slack's description requires it.
		req, _ := http.NewRequest(http.MethodPost, base+"chat.postMessage", strings.NewReader(url.Values{"text": {"hi"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("Prism answered %d to a message without a channel, want 422: validation is off", resp.StatusCode)
		}
		if e := classify(slack.StatusCodeError{Code: resp.StatusCode, Status: resp.Status}, true); !e.Permanent || e.MaybeSent {
			t.Errorf("a refused request classified %+v", e)
		}
	})
}
