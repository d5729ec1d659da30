package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/schedule"
	"github.com/cool-ai/beachd/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Key is an API key that may sign in.
type Key struct {
	Secret   string
	ReadOnly bool
}

type hashedKey struct {
	Key
	hash [32]byte
}

// Config configures the console.
type Config struct {
	// Keys may sign in; at least one is required.
	Keys []Key
	// Secret signs sessions and CSRF tokens; at least 16 bytes.
	Secret []byte
	// PublicURL is where beachd is reached; https makes cookies Secure.
	PublicURL string
	// Channels are the configured delivery channels, in display order.
	Channels []string
	// SessionLifetime bounds a sign-in; default 12 hours.
	SessionLifetime time.Duration
	// Pulse is how often live figures are recomputed at most; default 3 s.
	Pulse time.Duration
	Now   func() time.Time
	// Rand is the randomness of session ids and page nonces; default
	// crypto/rand.
	Rand io.Reader
}

// Validate reports what is wrong with cfg.
func (c Config) Validate() error {
	switch {
	case len(c.Keys) == 0:
		return errors.New("console: at least one key is required")
	case len(c.Secret) < 16:
		return errors.New("console: the secret must be at least 16 bytes")
	}
	for _, k := range c.Keys {
		if k.Secret == "" {
			return errors.New("console: a key is empty")
		}
	}
	return nil
}

// Approvals is what the console needs of the approvals service.
type Approvals interface {
	List(ctx context.Context, state, after string, limit int) ([]*approvals.View, error)
	ListByInjection(ctx context.Context, state string, limit int) ([]*approvals.View, error)
	Get(ctx context.Context, id string) (*approvals.View, error)
	Decide(ctx context.Context, id, decision, reason, keyID string) (*approvals.View, error)
	RetryInjection(ctx context.Context, id string) (*store.Injection, error)
}

var _ Approvals = (*approvals.Service)(nil)

// Schedules is what the console needs of the scheduler: list, run now,
// pause and resume.
type Schedules interface {
	List(ctx context.Context) ([]schedule.Status, error)
	RunNow(ctx context.Context, name string) (store.ScheduleRun, error)
	Pause(ctx context.Context, name, by string) (schedule.Status, error)
	Resume(ctx context.Context, name, by string) (schedule.Status, error)
}

var _ Schedules = (*schedule.Scheduler)(nil)

// Webhooks is what the console needs of the webhook channel.
type Webhooks interface {
	Endpoints() []webhook.EndpointStatus
	Enable(name string) bool
	// URL is the endpoint's configured URL; the console shows it without
	// its user information and with secret-looking query values hidden.
	URL(name string) string
}

// Enqueuer queues an envelope built inside beachd (the test event).
type Enqueuer interface {
	Enqueue(ctx context.Context, env *envelope.Envelope, to []envelope.Recipient, agent, source string) (string, error)
}

// Rendition is a delivery as its channel renders it now.
type Rendition struct {
	Subject string
	// HTML is the email's HTML part, shown in a sandboxed frame.
	HTML string
	// Text is the plain text (email text part, SMS, WhatsApp) or the
	// webhook's JSON body.
	Text string
	// Facts are short properties (encoding, segments, buttons).
	Facts []Fact
	// MIME is the raw email message.
	MIME []byte
}

// Fact is one labelled value.
type Fact struct{ Name, Value string }

// Renditions renders a delivery for the operator: without approval handles
// (no token, code or link is shown), at the current time.
type Renditions interface {
	Render(ctx context.Context, d *store.Delivery) (*Rendition, error)
}

// Store is the part of the store the console reads and acts on: the
// deliveries, and ids for what it creates. Every store.Store is one.
type Store interface {
	store.Deliveries
	NewID(prefix string) string
}

// Deps are the services the console shows and acts through. DB, Approvals
// and Renditions are required; a nil Schedules, Webhooks, Dev or
// Conversations hides its screen.
type Deps struct {
	DB         Store
	Approvals  Approvals
	Schedules  Schedules
	Webhooks   Webhooks
	Enqueuer   Enqueuer
	Renditions Renditions
	// Notify wakes the dispatcher after a retry.
	Notify func()
	// Dev is `beachd dev`'s inbox.
	Dev DevInbox
	// Conversations shows the Conversations and Inbound screens; nil
	// hides them.
	Conversations Conversations
	// Slack shows the Slack screen; nil hides it.
	Slack Slack
	Log   *slog.Logger
}

// Console serves /ui/.
type Console struct {
	cfg   Config
	deps  Deps
	keys  []hashedKey
	log   *slog.Logger
	pages map[string]*template.Template
	mux   *http.ServeMux
	pulse *pulse
}

// New builds the console. It starts no goroutine.
func New(cfg Config, deps Deps) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.DB == nil || deps.Approvals == nil || deps.Renditions == nil {
		return nil, errors.New("console: the store, approvals and renditions are required")
	}
	if cfg.SessionLifetime <= 0 {
		cfg.SessionLifetime = 12 * time.Hour
	}
	if cfg.Pulse <= 0 {
		cfg.Pulse = 3 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if deps.Notify == nil {
		deps.Notify = func() {}
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Console{cfg: cfg, deps: deps, log: log, mux: http.NewServeMux()}
	for _, k := range cfg.Keys {
		c.keys = append(c.keys, hashedKey{Key: k, hash: sha256.Sum256([]byte(k.Secret))})
	}
	if err := c.parse(); err != nil {
		return nil, err
	}
	c.pulse = newPulse(c)
	c.routes()
	return c, nil
}

func (c *Console) parse() error {
	layout, err := template.New("layout.html").Funcs(funcs(c.cfg.Now)).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return fmt.Errorf("console templates: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	c.pages = map[string]*template.Template{}
	for _, n := range names {
		name := n[len("templates/") : len(n)-len(".html")]
		if name == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return fmt.Errorf("console template %s: %w", name, err)
		}
		c.pages[name] = t
	}
	return nil
}

// ServeHTTP serves /ui/.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

type handler func(w http.ResponseWriter, r *http.Request, id identity)

func (c *Console) routes() {
	sub, _ := fs.Sub(assetFS, "assets")
	assets := http.StripPrefix("/ui/assets/", http.FileServerFS(sub))
	c.mux.Handle("GET /ui/assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		assets.ServeHTTP(w, r)
	}))
	c.mux.HandleFunc("GET /ui/login", c.loginPage)
	c.mux.HandleFunc("POST /ui/login", c.login)
	c.mux.Handle("POST /ui/logout", c.change(c.logout))
	c.mux.Handle("GET /ui/{$}", c.read(c.overview))
	c.mux.Handle("GET /ui/pulse", c.read(c.pulseJSON))
	c.mux.Handle("GET /ui/events", c.read(c.events))
	c.mux.Handle("GET /ui/deliveries", c.read(c.deliveries))
	c.mux.Handle("GET /ui/deliveries/{id}", c.read(c.delivery))
	c.mux.Handle("GET /ui/deliveries/{id}/frame", c.read(c.frame))
	c.mux.Handle("GET /ui/deliveries/{id}/mime", c.read(c.mime))
	c.mux.Handle("POST /ui/deliveries/{id}/retry", c.change(c.retry))
	c.mux.Handle("GET /ui/retry", c.read(c.bulkRetryPage))
	c.mux.Handle("POST /ui/retry", c.change(c.bulkRetry))
	c.mux.Handle("GET /ui/approvals", c.read(c.approvalsPage))
	c.mux.Handle("GET /ui/approvals/{id}", c.read(c.approval))
	c.mux.Handle("POST /ui/approvals/{id}/decide", c.change(c.decide))
	c.mux.Handle("POST /ui/approvals/{id}/retry-injection", c.change(c.retryInjection))
	c.mux.Handle("GET /ui/conversations", c.read(c.conversationsPage))
	c.mux.Handle("GET /ui/conversations/{id}", c.read(c.conversationPage))
	c.mux.Handle("GET /ui/inbound", c.read(c.inboundPage))
	c.mux.Handle("GET /ui/schedules", c.read(c.schedules))
	c.mux.Handle("POST /ui/schedules/{name}/run", c.change(c.runSchedule))
	c.mux.Handle("POST /ui/schedules/{name}/pause", c.change(c.pauseSchedule(true)))
	c.mux.Handle("POST /ui/schedules/{name}/resume", c.change(c.pauseSchedule(false)))
	c.mux.Handle("GET /ui/webhooks", c.read(c.webhooks))
	c.mux.Handle("POST /ui/webhooks/{name}/enable", c.change(c.enableEndpoint))
	c.mux.Handle("POST /ui/webhooks/{name}/test", c.change(c.testEvent))
	c.mux.Handle("GET /ui/slack", c.read(c.slackPage))
	c.mux.Handle("GET /ui/dev", c.read(c.devInbox))
	c.mux.Handle("POST /ui/dev/reply", c.change(c.devReply))
	c.mux.Handle("POST /ui/dev/slack/message", c.change(c.devSlackWrite))
	c.mux.Handle("POST /ui/dev/slack/click", c.change(c.devSlackClick))
	c.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		id, ok := c.identify(r)
		if !ok {
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		c.fail(w, r, id, http.StatusNotFound, "There is no such page.")
	})
}

// read serves pages to anyone signed in; a browser without a session is
// sent to the sign-in page, a tool gets 401.
func (c *Console) read(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := c.identify(r)
		if !ok {
			if r.Header.Get("Authorization") != "" || r.Header.Get("Accept") == "text/event-stream" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="beachd"`)
				http.Error(w, "missing or invalid API key", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/ui/login?next="+urlEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, r, id)
	})
}

// change guards every POST: a signed-in identity, a same-origin request,
// the CSRF token, and a key that may change things.
func (c *Console) change(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := c.identify(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="beachd"`)
			http.Error(w, "missing or invalid API key", http.StatusUnauthorized)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			c.fail(w, r, id, http.StatusBadRequest, "The form could not be read.")
			return
		}
		if !c.sameOrigin(r) {
			c.fail(w, r, id, http.StatusForbidden, "This form was not submitted from this site.")
			return
		}
		if !c.validCSRF(id, r.PostForm.Get("csrf")) {
			c.fail(w, r, id, http.StatusForbidden, "The form is missing its security token or it is out of date. Reload the page and try again.")
			return
		}
		if id.readOnly && r.URL.Path != "/ui/logout" {
			c.fail(w, r, id, http.StatusForbidden, "This key is read-only: it can see everything and change nothing.")
			return
		}
		h(w, r, id)
	})
}

// page is what every template gets.
type page struct {
	Title    string
	Nav      string
	Nonce    string
	CSRF     string
	ReadOnly bool
	KeyID    string
	Dev      bool
	// Has says which screens exist.
	Has   struct{ Schedules, Webhooks, Conversations, Inbound, Slack bool }
	Flash string
	Error string
	Data  any
}

func (c *Console) newPage(r *http.Request, id identity, nav, title string, data any) *page {
	p := &page{Title: title, Nav: nav, CSRF: c.csrfToken(id), ReadOnly: id.readOnly, KeyID: id.keyID,
		Dev: c.deps.Dev != nil, Data: data}
	p.Has.Schedules = c.deps.Schedules != nil
	p.Has.Webhooks = c.deps.Webhooks != nil
	p.Has.Conversations = c.deps.Conversations != nil
	p.Has.Inbound = c.deps.Conversations != nil
	p.Has.Slack = c.deps.Slack != nil
	p.Flash = flashText(r.URL.Query().Get("done"))
	return p
}

// render writes a page with its security headers.
func (c *Console) render(w http.ResponseWriter, status int, name string, p *page) {
	t := c.pages[name]
	if t == nil {
		c.log.Error("console: no template", "name", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var nb [16]byte
	_, _ = io.ReadFull(c.cfg.Rand, nb[:])
	p.Nonce = base64.StdEncoding.EncodeToString(nb[:])
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		c.log.Error("console: render page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+p.Nonce+"'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; frame-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail shows an error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, id identity, status int, msg string) {
	p := c.newPage(r, id, "", http.StatusText(status), nil)
	p.Error = msg
	if id.keyID == "" {
		p.ReadOnly = true
	}
	c.render(w, status, "error", p)
}

// internal logs err and shows a generic error page.
func (c *Console) internal(w http.ResponseWriter, r *http.Request, id identity, err error) {
	if errors.Is(err, store.ErrNotFound) {
		c.fail(w, r, id, http.StatusNotFound, "Not found: it may have been pruned after the retention period.")
		return
	}
	c.log.Error("console request failed", "path", r.URL.Path, "err", err)
	c.fail(w, r, id, http.StatusInternalServerError, "Something went wrong; the log has the details.")
}

// done redirects after a change (post/redirect/get) with a flash message
// key.
func done(w http.ResponseWriter, r *http.Request, to, flash string) {
	sep := "?"
	if bytes.ContainsRune([]byte(to), '?') {
		sep = "&"
	}
	http.Redirect(w, r, to+sep+"done="+urlEscape(flash), http.StatusSeeOther)
}

// flashText turns the flash key of a redirect into a sentence; unknown keys
// show nothing, so a link cannot make the console say something else.
func flashText(k string) string {
	return map[string]string{
		"retried":         "The delivery is queued again.",
		"bulk-retried":    "The dead deliveries are queued again.",
		"decided":         "The decision is recorded; its injection into the agent is queued.",
		"injection-retry": "The injection is queued again.",
		"run":             "The schedule's run has started; its outcome shows here when it ends.",
		"paused":          "The schedule is paused: it fires no slot until it is resumed.",
		"resumed":         "The schedule is resumed: it fires from its next slot on.",
		"enabled":         "The endpoint is enabled.",
		"test-sent":       "A test event is queued for the endpoint.",
		"replied":         "Your reply went in as if it came from the phone.",
		"slack-written":   "Your Slack message went in as if Slack had sent the event.",
		"slack-clicked":   "The button was pressed as if in Slack.",
		"signed-out":      "You are signed out.",
	}[k]
}
