package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/cool-ai/beachd/channels/slack"
	"github.com/cool-ai/beachd/console"
	"github.com/cool-ai/beachd/render"
)

// slackConsole shows the Slack channel on the console.
type slackConsole struct{ a *app }

func (s slackConsole) SlackStatus(ctx context.Context) console.SlackStatus {
	a := s.a
	st := console.SlackStatus{Configured: a.cfg.Slack != nil,
		InteractionsURL: a.cfg.PublicURL + slackInteractionsPath, EventsURL: a.cfg.PublicURL + slackEventsPath}
	if a.cfg.Slack != nil {
		st.TeamID = a.cfg.Slack.TeamID
	}
	st.Health = a.slackHealth.Status()
	names := sortedNames(a.cfg.Agents)
	for _, n := range names {
		if in := a.cfg.Agents[n].Inbound; in != nil && len(in.Slack) > 0 {
			st.Conversations = append(st.Conversations, n+": "+strings.Join(in.Slack, ", "))
		}
	}
	return st
}

// slackReady is what /readyz adds for Slack: the app's bot and workspace,
// and the token's problem when Slack refuses it.
func (a *app) slackReady() map[string]any {
	if a.slackClient == nil {
		return nil
	}
	h := a.slackClient.Health().Status()
	out := map[string]any{"team": h.Self.TeamID, "botUser": h.Self.UserID}
	if h.Problem != "" {
		out["problem"] = h.Problem
		out["problemSince"] = h.ProblemAt
	}
	if miss := h.Missing(slack.Scopes[:4]); len(miss) > 0 {
		var names []string
		for _, m := range miss {
			names = append(names, m.Name)
		}
		out["missingScopes"] = names
	}
	return out
}

// SlackMessages are the recorded Slack messages, oldest first.
func (d *devInbox) SlackMessages() []console.DevSlackMessage {
	if d.a.slackDev == nil {
		return nil
	}
	var out []console.DevSlackMessage
	for _, m := range d.a.slackDev.Log.Messages() {
		dm := console.DevSlackMessage{DeliveryID: m.DeliveryID, Channel: m.Channel, TS: m.TS, ThreadTS: m.ThreadTS, To: m.To,
			Text: m.Text, Ephemeral: m.Ephemeral, User: m.User, At: m.At, UpdatedAt: m.UpdatedAt}
		if dm.To == "" && m.Ephemeral {
			dm.To = m.User
		}
		for _, b := range m.Buttons {
			if b.ActionID == render.SlackActionApprove || b.ActionID == render.SlackActionDeny {
				dm.Buttons = append(dm.Buttons, console.DevSlackButton{Label: b.Text.Text, ActionID: b.ActionID, Value: b.Value})
			}
		}
		out = append(out, dm)
	}
	return out
}

// SlackWrite goes through /dev/slack/message's own handler.
func (d *devInbox) SlackWrite(ctx context.Context, user, channel, threadTS, text string) (string, error) {
	if d.a.slackDev == nil {
		return "", errors.New("Slack is not recorded here")
	}
	rec, err := d.devSlack(ctx, d.a.slackDev.Message, url.Values{"user": {user}, "channel": {channel}, "thread_ts": {threadTS}, "text": {text}})
	if err != nil {
		return "", err
	}
	var m slack.DevMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		return "", fmt.Errorf("the events endpoint's answer: %w", err)
	}
	if m.Status >= 300 {
		return "", fmt.Errorf("the events endpoint answered %d", m.Status)
	}
	return m.ThreadTS, nil
}

// SlackClick goes through /dev/slack/click's own handler.
func (d *devInbox) SlackClick(ctx context.Context, user, channel, action, value string) error {
	if d.a.slackDev == nil {
		return errors.New("Slack is not recorded here")
	}
	_, err := d.devSlack(ctx, d.a.slackDev.Click, url.Values{"user": {user}, "channel": {channel}, "action": {action}, "value": {value}})
	return err
}

func (d *devInbox) devSlack(ctx context.Context, h http.HandlerFunc, form url.Values) (*httptest.ResponseRecorder, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/dev/slack", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h(rec, req)
	if rec.Code >= 300 {
		return nil, fmt.Errorf("%d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	return rec, nil
}
