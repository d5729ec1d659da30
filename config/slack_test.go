package config

import (
	"strings"
	"testing"
	"time"
)

func TestSlackConfig(t *testing.T) {
	getenv := env(map[string]string{"SLACK_BOT_TOKEN": "xoxb-1234567890-abcdefghij", "SLACK_SIGNING_SECRET": "8f742231b10e8888abcd99aaabbb85a5"})
	cfg, err := Parse([]byte(`api_keys: [kkkkkkkkkkkkkkkkkkkk]
slack:
  bot_token: "${SLACK_BOT_TOKEN}"
  signing_secret: "${SLACK_SIGNING_SECRET}"
  api_base_url: http://127.0.0.1:4010
  timeout: 5s
`), "t.yaml", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := cfg.Slack
	if s.BotToken != "xoxb-1234567890-abcdefghij" || s.SigningSecret != "8f742231b10e8888abcd99aaabbb85a5" || s.Timeout != 5*time.Second {
		t.Fatalf("parsed %+v", s)
	}
	if s.APIURL() != "http://127.0.0.1:4010/" || (&SlackConfig{}).APIURL() != "https://slack.com/api/" {
		t.Errorf("APIURL %q", s.APIURL())
	}
	ok := `bot_token: xoxb-1234567890-abcdefghij, signing_secret: 8f742231b10e8888abcd99aaabbb85a5`
	for _, tc := range []struct{ yaml, key, says string }{
		{`slack: { signing_secret: 8f742231b10e8888abcd99aaabbb85a5 }`, "slack.bot_token", "required"},
		{`slack: { bot_token: xoxp-1234567890-abcdefghij, signing_secret: 8f742231b10e8888abcd99aaabbb85a5 }`, "slack.bot_token", "xoxb-"},
		{`slack: { bot_token: xoxb-1234567890-abcdefghij }`, "slack.signing_secret", "required"},
		{`slack: { bot_token: xoxb-1234567890-abcdefghij, signing_secret: not-hex }`, "slack.signing_secret", "32 hex"},
		{`slack: { ` + ok + `, api_base_url: "slack.com/api" }`, "slack.api_base_url", "absolute"},
		{`slack: { ` + ok + `, timeout: 3m }`, "slack.timeout", "2m"},
		{`slack: { ` + ok + `, lifetime: -1s }`, "slack.lifetime", "negative"},
		{`slack: { ` + ok + `, bot_user: U1 }`, "bot_user", ""},
		{`slack: { ` + ok + `, team_id: workspace }`, "slack.team_id", "T0123ABCD"},
	} {
		cfg, err := Parse([]byte("api_keys: [kkkkkkkkkkkkkkkkkkkk]\n"+tc.yaml), "t.yaml", getenv)
		if err == nil {
			_, err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want one naming %s (%q)", tc.yaml, err, tc.key, tc.says)
		}
	}
}
