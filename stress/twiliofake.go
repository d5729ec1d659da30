package stress

import "github.com/cool-ai/beachd/channels/twilio/twiliotest"

// Credentials the fake Twilio accepts.
const (
	TwilioAccount = "AC0123456789abcdef0123456789abcdef"
	TwilioToken   = "0123456789abcdef0123456789abcdef"
)

// FakeTwilio is the shared fake Twilio (package twiliotest), kept under
// this name for the daemon's end-to-end tests that still use it.
type FakeTwilio = twiliotest.Server

// TwilioReply is a canned answer to one request.
type TwilioReply = twiliotest.Reply

// TwilioMessage is one created message.
type TwilioMessage = twiliotest.Message

// NewFakeTwilio builds the fake accepting TwilioAccount and TwilioToken;
// serve it with httptest or net/http.
func NewFakeTwilio() *FakeTwilio { return twiliotest.New(TwilioAccount, TwilioToken) }

// TwilioError is Twilio's error JSON with the given HTTP status and code.
func TwilioError(status, code int, msg string) *TwilioReply {
	r := twiliotest.Error(status, code, msg)
	return &r
}
