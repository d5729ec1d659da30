package slack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/slack-go/slack"

	"github.com/cool-ai/beachd/channels"
)

// permanentCodes are Slack error codes a later attempt cannot cure: the
// recipient does not exist or the bot may not post there, or the app's
// token or scopes are wrong (an operator must act; the dead letter says
// why and can be retried once they have).
var permanentCodes = map[string]string{
	"channel_not_found":           "no such channel or user, or the bot cannot see it",
	"not_in_channel":              "the bot is not a member of the channel: invite it (/invite @app)",
	"is_archived":                 "the channel is archived",
	"user_not_found":              "no such user",
	"users_not_found":             "no user with that email address in the workspace",
	"user_disabled":               "the user is deactivated",
	"cannot_dm_bot":               "a bot cannot be sent a direct message",
	"restricted_action":           "the workspace does not let the app post there",
	"msg_too_long":                "the message is too long",
	"no_text":                     "the message has no text",
	"invalid_blocks":              "Slack refused the message's blocks",
	"invalid_blocks_format":       "Slack refused the message's blocks",
	"too_many_attachments":        "too many attachments",
	"invalid_auth":                "the bot token is not valid",
	"not_authed":                  "no bot token was sent",
	"account_inactive":            "the bot token belongs to a deleted user or app",
	"token_revoked":               "the bot token was revoked",
	"token_expired":               "the bot token expired",
	"no_permission":               "the token lacks a permission",
	"missing_scope":               "the app lacks a scope (chat:write, im:write, users:read.email)",
	"not_allowed_token_type":      "the token is not a bot token",
	"ekm_access_denied":           "the workspace's key management refused access",
	"team_access_not_granted":     "the app is not installed in the workspace",
	"org_login_required":          "the workspace requires an org login",
	"message_not_found":           "no such message to update",
	"cant_update_message":         "the message cannot be updated",
	"edit_window_closed":          "the message is too old to update",
	"invalid_arguments":           "Slack refused the request's arguments",
	"invalid_arg_name":            "Slack refused the request's arguments",
	"invalid_form_data":           "Slack refused the request's arguments",
	"invalid_post_type":           "Slack refused the request's content type",
	"missing_post_type":           "Slack refused the request's content type",
	"invalid_metadata_format":     "Slack refused the message metadata",
	"invalid_metadata_schema":     "Slack refused the message metadata",
	"metadata_too_large":          "Slack refused the message metadata",
	"message_limit_exceeded":      "the workspace's message limit is reached",
	"duplicate_message_not_found": "no such message",
}

// classify turns a Web API error into the dispatcher's error. sent says
// whether the request may have reached Slack before it failed (a timeout
// or a broken connection after a POST): such a failure is MaybeSent.
func classify(err error, sent bool) *channels.Error {
	out := &channels.Error{Err: err}
	receipt := func(code string, meta map[string]any) {
		m := map[string]any{"source": "slack", "error": code}
		for k, v := range meta {
			m[k] = v
		}
		out.Receipt = &channels.Receipt{Data: map[string]any{"ok": false, "error": code}, Meta: m}
	}
	var rl *slack.RateLimitedError
	var se slack.SlackErrorResponse
	var sc slack.StatusCodeError
	var ne net.Error
	switch {
	case errors.As(err, &rl):
		out.RetryAfter, out.RateLimited = rl.RetryAfter, true
		if out.RetryAfter <= 0 {
			out.RetryAfter = time.Second
		}
		receipt("ratelimited", map[string]any{"retryAfter": out.RetryAfter.String()})
	case errors.As(err, &se):
		code := se.Err
		if why, ok := permanentCodes[code]; ok {
			out.Permanent = true
			out.Err = fmt.Errorf("slack %s: %s", code, why)
		} else {
			out.Err = fmt.Errorf("slack %s", code)
		}
		if code == "ratelimited" {
			out.RetryAfter = time.Second
		}
		receipt(code, nil)
	case errors.As(err, &sc):
		// 5xx and unexpected statuses: temporary. A 4xx other than 429 is
		// Slack refusing the request itself.
		if sc.Code >= 400 && sc.Code < 500 && sc.Code != 408 && sc.Code != 429 {
			out.Permanent = true
		}
		out.MaybeSent = sent && sc.Code >= 500
		receipt(fmt.Sprintf("http_%d", sc.Code), map[string]any{"status": sc.Code})
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne):
		out.MaybeSent = sent
		receipt("timeout", nil)
	default:
		out.MaybeSent = sent
	}
	return out
}
