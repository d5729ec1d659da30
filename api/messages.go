package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Full-message pages. An SMS or WhatsApp message that had to be cut short
// ends with a link to the whole message: GET /m/{ref}, where ref is the
// delivery id and a MAC of it under a key derived from the approvals
// secret. The link is the credential (like the message it completes), so
// the page needs no API key, tells a wrong MAC and an unknown delivery
// apart from nothing, and is never cached, indexed or framed.

// MessageLinks mints and checks full-message links.
type MessageLinks struct {
	key  []byte
	base string
}

// NewMessageLinks derives the links' key from secret (the approvals
// secret; the derivation keeps the two uses apart) and roots the links at
// publicURL.
func NewMessageLinks(secret []byte, publicURL string) *MessageLinks {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("beachd full-message links v1"))
	return &MessageLinks{key: m.Sum(nil), base: strings.TrimRight(publicURL, "/")}
}

// URL is the link to the full message of delivery id.
func (l *MessageLinks) URL(deliveryID string) string {
	return l.base + "/m/" + deliveryID + "." + l.mac(deliveryID)
}

func (l *MessageLinks) mac(id string) string {
	m := hmac.New(sha256.New, l.key)
	m.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// maxRef bounds a ref read from a URL.
const maxRef = 128

// Check returns the delivery id of a ref whose MAC is right.
func (l *MessageLinks) Check(ref string) (string, bool) {
	if len(ref) > maxRef {
		return "", false
	}
	id, mac, ok := strings.Cut(ref, ".")
	if !ok || id == "" || mac == "" {
		return "", false
	}
	if !hmac.Equal([]byte(mac), []byte(l.mac(id))) {
		return "", false
	}
	return id, true
}

// MessagePage serves the full messages behind MessageLinks.
type MessagePage struct {
	Links *MessageLinks
	DB    store.Deliveries
	// Render makes the page's HTML document for a delivery's envelope
	// (the daemon renders it as the email channel would).
	Render func(env *envelope.Envelope, d *store.Delivery) (string, error)
	Log    *slog.Logger
}

// MessageRoutes mount p at /m/{ref}. HEAD is routed to GET by ServeMux.
func MessageRoutes(p *MessagePage) []Route {
	return []Route{{Method: "GET", Pattern: "/m/{ref}", Handler: p, Auth: false}}
}

// pageCSP lets the rendered message style itself and show remote and
// inline images (A2UI surfaces may use http ones), and nothing else: no
// scripts, forms, frames or fetches.
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src https: http: data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var goneTmpl = template.Must(template.New("gone").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.}}</title></head><body style="font-family: system-ui, sans-serif; margin: 3em auto; max-width: 32em; padding: 0 1em">
<p>{{.}}</p></body></html>`))

func (p *MessagePage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Robots-Tag", "noindex, nofollow")
	h.Set("Content-Type", "text/html; charset=utf-8")
	gone := func(status int, msg string) {
		w.WriteHeader(status)
		goneTmpl.Execute(w, msg)
	}
	id, ok := p.Links.Check(r.PathValue("ref"))
	if !ok {
		gone(http.StatusNotFound, "This link is not valid.")
		return
	}
	env, d, err := p.load(r, id)
	if errors.Is(err, store.ErrNotFound) {
		// A valid link whose message was removed (retention).
		gone(http.StatusGone, "This message is no longer available.")
		return
	}
	if err != nil {
		p.fail(w, id, err)
		return
	}
	page, err := p.Render(env, d)
	if err != nil {
		p.fail(w, id, err)
		return
	}
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(page))
}

// load reads delivery id and its envelope.
func (p *MessagePage) load(r *http.Request, id string) (*envelope.Envelope, *store.Delivery, error) {
	d, err := p.DB.Delivery(r.Context(), id)
	if err != nil {
		return nil, nil, err
	}
	rec, err := p.DB.Envelope(r.Context(), d.EnvelopeID)
	if err != nil {
		return nil, nil, err
	}
	env := new(envelope.Envelope)
	if err := envelope.UnmarshalStored(rec.Envelope, env); err != nil {
		return nil, nil, err
	}
	return env, d, nil
}

func (p *MessagePage) fail(w http.ResponseWriter, id string, err error) {
	if p.Log != nil {
		p.Log.Error("full-message page", "delivery_id", id, "err", err)
	}
	w.WriteHeader(http.StatusInternalServerError)
	goneTmpl.Execute(w, "This message cannot be shown right now.")
}
