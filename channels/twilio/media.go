package twilio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
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
// that is still not type/subtype fails with ErrMediaType.
func (c *Client) FetchMedia(ctx context.Context, rawURL string, max int64) ([]byte, string, error) {
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
	if loc := resp.Header.Get("Location"); isRedirect(resp.StatusCode) && loc != "" {
		resp.Body.Close()
		next, err := u.Parse(loc)
		if err != nil {
			return nil, "", fmt.Errorf("twilio media: redirect to an unreadable location: %w", err)
		}
		if next.Scheme != "https" && !(next.Scheme == "http" && c.base.Scheme == "http") {
			return nil, "", fmt.Errorf("twilio media: redirect to %s://%s refused: https only", next.Scheme, next.Host)
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
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, "", fmt.Errorf("twilio media: %s answered HTTP %d: %s", resp.Request.URL.Host, resp.StatusCode, truncate(strings.TrimSpace(string(b)), 200))
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
