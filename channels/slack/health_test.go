package slack

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

// Health keeps the token's scopes Slack names, the last token error of a
// call until one succeeds (other errors leave it), and what auth.test said.
func TestHealth(t *testing.T) {
	h := &Health{}
	if s := h.Status(); s.Scopes != nil || s.Missing(Scopes) != nil {
		t.Fatalf("scopes known before any answer: %+v", s)
	}
	h.noteScopes(http.Header{"X-Oauth-Scopes": {"chat:write, im:write,users:read"}}, time.Unix(1, 0))
	miss := h.Status().Missing(Scopes[:4])
	if len(miss) != 1 || miss[0].Name != "users:read.email" {
		t.Fatalf("missing %+v", miss)
	}
	at := time.Unix(100, 0)
	h.call(slack.SlackErrorResponse{Err: "token_revoked"}, at)
	h.call(slack.SlackErrorResponse{Err: "not_in_channel"}, at.Add(time.Minute))
	h.call(slack.SlackErrorResponse{Err: "token_expired"}, at.Add(2*time.Minute))
	if s := h.Status(); s.Problem != "token_expired: the bot token expired" || !s.ProblemAt.Equal(at) {
		t.Fatalf("problem %q since %v", s.Problem, s.ProblemAt)
	}
	h.call(errors.New("connection refused"), at.Add(3*time.Minute))
	if h.Status().Problem == "" {
		t.Fatal("a network error cleared the token problem")
	}
	h.call(nil, at.Add(4*time.Minute))
	if s := h.Status(); s.Problem != "" || !s.ProblemAt.IsZero() {
		t.Fatalf("a success left %q", s.Problem)
	}
	var nilHealth *Health
	nilHealth.call(nil, at)
	nilHealth.Event(at)
	if nilHealth.Status().Events != 0 {
		t.Fatal("nil health")
	}
}

// FuzzOAuthScopes: whatever X-OAuth-Scopes a peer sends, Health keeps at
// most 200 scopes, each trimmed, non-empty and without a comma, and
// ignores a header over 4 KiB.
func FuzzOAuthScopes(f *testing.F) {
	for _, s := range []string{"chat:write,im:write", " , ,", strings.Repeat("a,", 300), "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := &Health{}
		h.noteScopes(http.Header{"X-Oauth-Scopes": {v}}, time.Unix(1, 0))
		got := h.Status().Scopes
		if len(v) > 4096 && got != nil {
			t.Fatalf("a %d-byte header kept", len(v))
		}
		if len(got) > 200 {
			t.Fatalf("%d scopes kept", len(got))
		}
		for _, s := range got {
			if s == "" || s != strings.TrimSpace(s) || strings.Contains(s, ",") {
				t.Fatalf("scope %q", s)
			}
		}
	})
}
