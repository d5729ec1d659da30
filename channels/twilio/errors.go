package twilio

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	twclient "github.com/twilio/twilio-go/client"

	"github.com/cool-ai/beachd/channels"
)

// Sentinel errors of the package. Match them with errors.Is.
var (
	// ErrOptedOut: the recipient sent STOP (or Twilio says they did).
	ErrOptedOut = errors.New("recipient opted out (STOP)")
	// ErrOutsideWindow: a WhatsApp free-form message outside the 24-hour
	// customer-service window, with no content template configured.
	ErrOutsideWindow = errors.New("whatsapp: outside the 24-hour window and no content template configured")
	// ErrBadNumber: the recipient is not an E.164 number.
	ErrBadNumber = errors.New("recipient is not an E.164 phone number")
	// ErrEmptyMessage: nothing in the envelope is meant for this channel.
	ErrEmptyMessage = errors.New("nothing to send on this channel")
	// ErrUnknownSender: a delivery names a sending number (Extra "from")
	// that is not one of the channel's configured numbers.
	ErrUnknownSender = errors.New("the sending number the delivery names (extra \"from\") is not ours: add it to the channel's numbers")
	// ErrNoWindowTemplate: a delivery asks for WhatsApp's window template
	// and none is configured.
	ErrNoWindowTemplate = errors.New("whatsapp: the delivery asks for the window template and none is configured: set twilio.whatsapp.window_template to a content SID (HX…)")
	// ErrUnknownTemplate: a delivery asks for a template (Extra
	// "template") this channel does not have.
	ErrUnknownTemplate = errors.New("the delivery asks for a template this channel does not have")
)

// permanentCodes are Twilio error codes that no retry will fix: the number
// is invalid, unreachable, a landline, blocked, or has opted out; the
// WhatsApp recipient is outside the session window or not on WhatsApp; the
// request itself is wrong (unverified sender, bad content template).
var permanentCodes = map[int]string{
	21211: "invalid 'To' phone number",
	21212: "invalid 'From' phone number",
	21214: "'To' phone number cannot be reached",
	21217: "phone number does not appear to be valid",
	21401: "invalid phone number",
	21407: "this phone number type does not support SMS",
	21408: "permission to send to this region is not enabled",
	21421: "phone number is invalid",
	21606: "the 'From' number is not a valid message-capable number",
	21608: "unverified number on a trial account",
	21610: "recipient opted out (STOP)",
	21612: "the 'To' number is not reachable via SMS or MMS",
	21614: "'To' number is not a valid mobile number (landline?)",
	21617: "message body exceeds the 1600 character limit",
	21621: "the 'From' number has not been enabled for MMS",
	21656: "invalid ContentVariables",
	30003: "unreachable destination handset",
	30004: "message blocked",
	30005: "unknown destination handset",
	30006: "landline or unreachable carrier",
	30007: "message filtered as spam by the carrier",
	30008: "unknown error from the carrier",
	63003: "channel could not find the 'To' address (not on WhatsApp?)",
	63016: "outside the WhatsApp 24-hour window: a content template is required",
	63024: "invalid message recipient",
}

// temporaryCodes are throttles and transient provider faults.
var temporaryCodes = map[int]bool{
	20429: true, // too many requests
	20500: true, // internal server error
	20503: true, // service unavailable
	30001: true, // queue overflow
	63017: true, // WhatsApp rate limit
	63018: true, // WhatsApp rate limit
}

// optOutCodes mean the recipient opted out at Twilio.
var optOutCodes = map[int]bool{21610: true}

// classify turns a failed Twilio call into a channels.Error with a receipt.
// maySent says whether the call was one that sends (a POST of a Message).
func classify(ctx context.Context, err error, info *callInfo, sends bool) *channels.Error {
	wrote, status, header, body := info.snapshot()
	out := &channels.Error{Err: err}
	if ra := retryAfter(header); ra > 0 {
		out.RetryAfter = ra
	}
	var rest *twclient.TwilioRestError
	var v1 *twclient.RestErrorV1
	switch {
	case errors.As(err, &rest):
		if rest.Status == 0 {
			rest.Status = status
		}
		out.Receipt = errorReceipt(rest.Status, rest.Code, rest.Message, rest.MoreInfo)
		out.Err = fmt.Errorf("twilio error %d (HTTP %d): %s", rest.Code, rest.Status, describeCode(rest.Code, rest.Message))
		if optOutCodes[rest.Code] {
			out.Err = fmt.Errorf("%w: twilio error %d", ErrOptedOut, rest.Code)
		}
		out.Permanent = permanentByCode(rest.Code, rest.Status)
	case errors.As(err, &v1):
		out.Receipt = errorReceipt(v1.HttpStatusCode, v1.Code, v1.Message, "")
		out.Err = fmt.Errorf("twilio error %d (HTTP %d): %s", v1.Code, v1.HttpStatusCode, describeCode(v1.Code, v1.Message))
		out.Permanent = permanentByCode(v1.Code, v1.HttpStatusCode)
	case status >= 400:
		// An error status whose body is not Twilio's JSON (a proxy's HTML
		// page, a truncated answer): temporary, whatever the status.
		out.Receipt = &channels.Receipt{
			Data: map[string]any{"status": status, "body": truncate(string(body), 512)},
			Meta: map[string]any{"source": "twilio", "status": "error", "httpStatus": status},
		}
		out.Err = fmt.Errorf("twilio answered HTTP %d with an unreadable error body", status)
	case status != 0:
		// A 2xx whose body did not decode: the message may exist.
		out.Err = fmt.Errorf("read twilio answer (HTTP %d): %w", status, err)
		out.MaybeSent = sends
	default:
		// No response at all. If the request was written, Twilio may have
		// acted on it (a timeout waiting for the answer).
		out.MaybeSent = sends && wrote
		if ctx.Err() != nil {
			out.Err = fmt.Errorf("twilio call: %w (%w)", ctx.Err(), err)
		} else {
			out.Err = fmt.Errorf("twilio call: %w", err)
		}
	}
	return out
}

func permanentByCode(code, status int) bool {
	if _, ok := permanentCodes[code]; ok {
		return true
	}
	if temporaryCodes[code] || status == http.StatusTooManyRequests || status >= 500 || status == http.StatusRequestTimeout {
		return false
	}
	// 401/403 (bad credentials, suspended account) and 404 are operator
	// problems a retry may outlive once fixed; other 4xx are our request's
	// fault and will fail the same way again.
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return false
	}
	return status >= 400 && status < 500
}

// describeCode is the text of a Twilio error for our logs and dead-letter
// reasons: Twilio's message, with phone numbers in it redacted.
func describeCode(code int, msg string) string {
	if d, ok := permanentCodes[code]; ok && msg == "" {
		return d
	}
	if msg == "" {
		return "no message"
	}
	return truncate(phoneNumber.ReplaceAllStringFunc(msg, redact), 300)
}

var phoneNumber = regexp.MustCompile(`\+?[0-9][0-9 ()-]{6,18}[0-9]`)

func errorReceipt(status, code int, msg, more string) *channels.Receipt {
	return &channels.Receipt{
		Data: map[string]any{"status": status, "code": code, "message": msg, "more_info": more},
		Meta: map[string]any{"source": "twilio", "status": "error", "errorCode": code, "httpStatus": status},
	}
}

// retryAfter reads Retry-After (seconds or an HTTP date is not used by
// Twilio; seconds only), capped at an hour.
func retryAfter(h http.Header) time.Duration {
	if h == nil {
		return 0
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		if t, err := http.ParseTime(v); err == nil {
			d := time.Until(t)
			if d > 0 && d <= time.Hour {
				return d
			}
		}
		return 0
	}
	return min(time.Duration(n)*time.Second, time.Hour)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…" // not half a character
}
