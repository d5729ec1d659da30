package twilio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cool-ai/beachd/channels/fetch"
)

// Errors of FetchMedia. Match them with errors.Is.
var (
	// ErrMediaURL: the URL is not a media URL on Twilio's API host (or
	// the configured API base URL).
	ErrMediaURL = errors.New("twilio media: not a media URL on Twilio's API host")
	// ErrMediaTooLarge: the media is larger than the caller's bound.
	ErrMediaTooLarge = errors.New("twilio media: larger than allowed")
	// ErrMediaType: the media has no usable media type.
	ErrMediaType = errors.New("twilio media: no valid media type")
)

// TwilioMediaHost is the only host an inbound message's media URL may name.
const TwilioMediaHost = "api.twilio.com"

// DefaultMediaMax bounds FetchMedia when the caller gives no bound:
// WhatsApp's largest media (16 MB) with room to spare.
const DefaultMediaMax = 16 << 20

// mediaTimeout bounds one FetchMedia call, both hops.
const mediaTimeout = 60 * time.Second

// maxMediaURL bounds a media URL's length.
const maxMediaURL = 2048

// MediaURLOnTwilio reports whether raw is a media URL on Twilio's API host:
// https://api.twilio.com/2010-04-01/Accounts/…/Media/…, with no user-info,
// port, query or fragment.
func MediaURLOnTwilio(raw string) bool {
	u, ok := parseMediaURL(raw)
	return ok && u.Scheme == "https" && u.Host == TwilioMediaHost
}

func parseMediaURL(raw string) (*url.URL, bool) {
	if raw == "" || len(raw) > maxMediaURL {
		return nil, false
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" || u.Host == "" {
		return nil, false
	}
	p := u.EscapedPath()
	if !strings.HasPrefix(p, "/2010-04-01/Accounts/") || !strings.Contains(p, "/Media/") {
		return nil, false
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return nil, false
		}
	}
	return u, true
}

// FetchMedia downloads the media of an inbound message (MediaUrlN) with the
// account's credentials, at most max bytes (DefaultMediaMax when max ≤ 0),
// and returns its bytes and media type (type/subtype, lower case, without
// parameters).
//
// Only a media URL of this account on https://api.twilio.com is fetched
// (or one on the configured API base URL, a test double); any other URL
// fails with ErrMediaURL before a request is made. Twilio answers a media
// URL with a redirect to its media store: that redirect is followed by the
// guarded fetch client (ClientConfig.MediaFetch) in a new request that
// carries no credentials, https only (http only when the API base itself
// is plain http, a local test double). A Content-Type that is missing,
// unreadable or application/octet-stream is sniffed from the bytes; one
// that is still not type/subtype fails with ErrMediaType. Every error is
// a *MediaError, which says whether a later try could succeed.
func (c *Client) FetchMedia(ctx context.Context, rawURL string, max int64) ([]byte, string, error) {
	data, mt, err := c.fetchMedia(ctx, rawURL, max)
	if err != nil {
		return nil, "", classifyMedia(err)
	}
	return data, mt, nil
}

func (c *Client) fetchMedia(ctx context.Context, rawURL string, max int64) ([]byte, string, error) {
	if max <= 0 {
		max = DefaultMediaMax
	}
	u, ok := parseMediaURL(rawURL)
	onTwilio := ok && u.Scheme == "https" && u.Host == TwilioMediaHost
	onBase := ok && u.Scheme == c.base.Scheme && u.Host == c.base.Host && strings.HasPrefix(u.Path, c.base.Path+"/")
	if !onTwilio && !onBase {
		return nil, "", fmt.Errorf("%w: %q", ErrMediaURL, truncate(rawURL, 200))
	}
	path := u.Path
	if onBase {
		path = strings.TrimPrefix(path, c.base.Path)
	}
	if !strings.HasPrefix(path, "/2010-04-01/Accounts/"+c.sid+"/") {
		return nil, "", fmt.Errorf("%w: %q is not a media URL of account %s", ErrMediaURL, truncate(rawURL, 200), c.sid)
	}
	ctx, cancel := context.WithTimeout(ctx, mediaTimeout)
	defer cancel()

	info := &callInfo{}
	hc := c.httpClient(ctx, info)
	hc.Timeout = mediaTimeout
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", fmt.Errorf("twilio media: build request: %w", err)
	}
	user, pass := c.creds.Username, c.creds.Password
	req.SetBasicAuth(user, pass)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("twilio media: fetch %s: %w", u.Redacted(), err)
	}
	host := "Twilio"
	if loc := resp.Header.Get("Location"); isRedirect(resp.StatusCode) && loc != "" {
		resp.Body.Close()
		next, err := u.Parse(loc)
		if err != nil {
			return nil, "", fmt.Errorf("%w: twilio media: redirect to an unreadable location: %w", errMediaRedirect, err)
		}
		if next.Scheme != "https" && !(next.Scheme == "http" && c.base.Scheme == "http") {
			return nil, "", fmt.Errorf("%w: twilio media: redirect to %s://%s refused: https only", errMediaRedirect, next.Scheme, next.Host)
		}
		// A new request, without credentials: Twilio's media store is
		// reached by the signed URL Twilio redirected to.
		resp, err = c.media.Get(ctx, next.String())
		if errors.Is(err, fetch.ErrTooLarge) {
			return nil, "", fmt.Errorf("%w: %w", ErrMediaTooLarge, err)
		}
		if err != nil {
			return nil, "", fmt.Errorf("twilio media: fetch from the media store %s: %w", next.Host, err)
		}
		host = "Twilio's media store"
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, "", &mediaStatus{host: host, status: resp.StatusCode, err: fmt.Errorf("twilio media: %s answered HTTP %d: %s",
			resp.Request.URL.Host, resp.StatusCode, truncate(strings.TrimSpace(string(b)), 200))}
	}
	if resp.ContentLength > max {
		return nil, "", fmt.Errorf("%w: %d bytes, at most %d", ErrMediaTooLarge, resp.ContentLength, max)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if errors.Is(err, fetch.ErrTooLarge) {
		return nil, "", fmt.Errorf("%w: over the media fetch client's bound (%w)", ErrMediaTooLarge, err)
	}
	if err != nil {
		return nil, "", fmt.Errorf("twilio media: read: %w", err)
	}
	if int64(len(data)) > max {
		return nil, "", fmt.Errorf("%w: more than %d bytes", ErrMediaTooLarge, max)
	}
	mt, err := mediaType(resp.Header.Get("Content-Type"), data)
	if err != nil {
		return nil, "", err
	}
	return data, mt, nil
}

// errMediaRedirect marks a redirect FetchMedia refuses to follow.
var errMediaRedirect = errors.New("redirect refused")

// mediaStatus is an answer other than 200 from the API host or the media
// store.
type mediaStatus struct {
	host   string // "Twilio" or "Twilio's media store"
	status int
	err    error
}

func (e *mediaStatus) Error() string { return e.err.Error() }

// MediaError is every error of FetchMedia. Permanent says no later try can
// fetch this media: the URL or a redirect is refused, the address a
// redirect names is refused by the fetch client, the media is too large or
// has no usable type, or the host answered a 4xx other than 408 and 429
// (401, 403, 404, 410: the media is gone, or these credentials may not
// have it). A 5xx, 408, 429, a timeout or a connection failure is
// temporary. Reason is a short description for a person — no URL, no
// credential, nothing of the answer's body.
type MediaError struct {
	// Status is the HTTP status answered (0 when the failure is not one).
	Status int
	// Permanent: no retry can fetch this media.
	Permanent bool
	// Reason says what went wrong in a few words.
	Reason string
	Err    error
}

func (e *MediaError) Error() string { return e.Err.Error() }
func (e *MediaError) Unwrap() error { return e.Err }

// MediaPermanent reports whether no retry can fetch the media.
func (e *MediaError) MediaPermanent() bool { return e.Permanent }

// MediaReason is Reason.
func (e *MediaError) MediaReason() string { return e.Reason }

// isTimeout reports a network error that is a timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// classifyMedia wraps a FetchMedia failure in a MediaError.
func classifyMedia(err error) *MediaError {
	me := &MediaError{Err: err}
	var st *mediaStatus
	switch {
	case errors.As(err, &st):
		me.Status = st.status
		me.Permanent = st.status >= 400 && st.status < 500 && st.status != http.StatusRequestTimeout && st.status != http.StatusTooManyRequests
		me.Reason = fmt.Sprintf("%s answered HTTP %d", st.host, st.status)
		if t := http.StatusText(st.status); t != "" {
			me.Reason += " (" + t + ")"
		}
	case errors.Is(err, ErrMediaURL):
		me.Permanent, me.Reason = true, "its address is not a media URL of this Twilio account"
	case errors.Is(err, errMediaRedirect):
		me.Permanent, me.Reason = true, "Twilio redirected it to an address beachd does not follow"
	case errors.Is(err, fetch.ErrRefused), errors.Is(err, fetch.ErrTooManyRedirects):
		me.Permanent, me.Reason = true, "the media store's address was refused"
	case errors.Is(err, ErrMediaTooLarge):
		me.Permanent, me.Reason = true, "it is larger than allowed"
	case errors.Is(err, ErrMediaType):
		me.Permanent, me.Reason = true, "it has no usable media type"
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		me.Reason = "no answer in time"
	default:
		me.Reason = "the fetch failed (network)"
	}
	return me
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// mediaType is the media type a response declares, or the one sniffed
// from data when it declares none (or only application/octet-stream). A
// declared type that does not parse is refused.
func mediaType(header string, data []byte) (string, error) {
	mt := ""
	if header != "" {
		t, _, err := mime.ParseMediaType(header)
		if err != nil {
			return "", fmt.Errorf("%w: Content-Type %q", ErrMediaType, truncate(header, 100))
		}
		mt = t
	}
	if mt == "" || mt == "application/octet-stream" {
		mt, _, _ = mime.ParseMediaType(http.DetectContentType(data))
	}
	if !validMediaType(mt) {
		return "", fmt.Errorf("%w: %q", ErrMediaType, truncate(mt, 100))
	}
	return mt, nil
}

// validMediaType: type/subtype, each a non-empty MIME token, at most 127
// characters.
func validMediaType(mt string) bool {
	t, sub, ok := strings.Cut(mt, "/")
	if !ok || t == "" || sub == "" || len(mt) > 127 {
		return false
	}
	for _, r := range t + sub {
		if !isTokenChar(r) {
			return false
		}
	}
	return true
}

func isTokenChar(r rune) bool {
	return r > 0x20 && r < 0x7f && !strings.ContainsRune(`()<>@,;:\"/[]?=`, r)
}
