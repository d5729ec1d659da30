package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/schedule"
	"github.com/cool-ai/beachd/store"
)

// --- sign-in ---

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if id, ok := c.identify(r); ok && r.URL.Query().Get("done") == "" {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		_ = id
		return
	}
	p := &page{Title: "Sign in", ReadOnly: true, Data: map[string]string{"Token": c.loginToken(), "Next": safeNext(r.URL.Query().Get("next"))}}
	p.Flash = flashText(r.URL.Query().Get("done"))
	c.render(w, http.StatusOK, "login", p)
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	bad := func(status int, msg string) {
		p := &page{Title: "Sign in", ReadOnly: true, Error: msg, Data: map[string]string{"Token": c.loginToken(), "Next": safeNext(r.PostForm.Get("next"))}}
		c.render(w, status, "login", p)
	}
	if err := r.ParseForm(); err != nil {
		bad(http.StatusBadRequest, "The form could not be read.")
		return
	}
	if !c.sameOrigin(r) || !c.validLoginToken(r.PostForm.Get("csrf")) {
		bad(http.StatusForbidden, "The sign-in form is out of date. Please try again.")
		return
	}
	k, ok := c.matchKey(strings.TrimSpace(r.PostForm.Get("key")))
	if !ok {
		c.log.Info("console sign-in refused", "remote", r.RemoteAddr)
		bad(http.StatusUnauthorized, "That key is not one of beachd's API keys.")
		return
	}
	v, exp := c.newSession(k)
	c.setSession(w, v, exp)
	c.log.Info("console sign-in", "key_id", keyID(k.Secret), "read_only", k.ReadOnly)
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

// safeNext keeps redirects inside the console.
func safeNext(n string) string {
	if strings.HasPrefix(n, "/ui/") && !strings.HasPrefix(n, "//") && !strings.ContainsAny(n, "\\\r\n") {
		return n
	}
	return "/ui/"
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, id identity) {
	c.clearSession(w)
	http.Redirect(w, r, "/ui/login?done=signed-out", http.StatusSeeOther)
}

// --- overview ---

type channelRow struct {
	Name  string
	Stats *store.ChannelStats
	// Health: "ok", "degraded" (retries or an error in the last hour),
	// "failing" (deaths in the last hour), "idle".
	Health, Note string
}

type overviewData struct {
	Stats     *store.DeliveryStats
	Channels  []channelRow
	Endpoints []webhook.EndpointStatus
	Pending   int
	DeadInj   int
	Schedules int
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, id identity) {
	ctx := r.Context()
	st, err := c.deps.DB.DeliveryStats(ctx, c.cfg.Now())
	if err != nil {
		c.internal(w, r, id, err)
		return
	}
	d := overviewData{Stats: st}
	seen := map[string]*store.ChannelStats{}
	for _, cs := range st.Channels {
		seen[cs.Channel] = cs
	}
	names := append([]string(nil), c.cfg.Channels...)
	for _, cs := range st.Channels {
		if !contains(names, cs.Channel) {
			names = append(names, cs.Channel)
		}
	}
	for _, n := range names {
		cs := seen[n]
		if cs == nil {
			cs = &store.ChannelStats{Channel: n, ByState: map[store.State]int{}}
		}
		d.Channels = append(d.Channels, health(cs, c.cfg.Now(), contains(c.cfg.Channels, n)))
	}
	if c.deps.Webhooks != nil {
		d.Endpoints = c.deps.Webhooks.Endpoints()
	}
	if vs, err := c.deps.Approvals.List(ctx, store.ApprovalPending, "", 1000); err == nil {
		d.Pending = len(vs)
	}
	if vs, err := c.deps.Approvals.ListByInjection(ctx, "dead", 1000); err == nil {
		d.DeadInj = len(vs)
	}
	if c.deps.Schedules != nil {
		if ss, err := c.deps.Schedules.List(ctx); err == nil {
			d.Schedules = len(ss)
		}
	}
	c.render(w, http.StatusOK, "overview", c.newPage(r, id, "overview", "Overview", d))
}

// health judges a channel by its recent outcomes: beachd has no separate
// probe of SMTP or Twilio, so what its deliveries met is the measure.
func health(cs *store.ChannelStats, now time.Time, configured bool) channelRow {
	row := channelRow{Name: cs.Channel, Stats: cs, Health: "ok"}
	recentErr := !cs.LastErrorAt.IsZero() && now.Sub(cs.LastErrorAt) < time.Hour
	switch {
	case !configured:
		row.Health, row.Note = "off", "not configured; old deliveries remain"
	case cs.Dead1h > 0:
		row.Health, row.Note = "failing", "deliveries died in the last hour"
	case cs.Retrying > 0 || recentErr:
		row.Health, row.Note = "degraded", "retries or errors in the last hour"
	case cs.Sent24h == 0:
		row.Health, row.Note = "idle", "nothing sent in 24 h"
	}
	return row
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// --- deliveries ---

type deliveriesData struct {
	Filter     url.Values
	Deliveries []deliveryRow
	Next       string
	Channels   []string
	States     []store.State
	Problem    string
}

func (c *Console) deliveries(w http.ResponseWriter, r *http.Request, id identity) {
	q := r.URL.Query()
	// The form's datetime-local fields are in UTC minutes; the API wants RFC 3339.
	for _, k := range []string{"since", "until"} {
		if v := q.Get(k); v != "" && !strings.Contains(v, "Z") && len(v) == len("2006-01-02T15:04") {
			q.Set(k, v+":00Z")
		}
	}
	d := deliveriesData{Filter: q, Channels: c.cfg.Channels, States: store.States}
	f, err := api.ParseDeliveryFilter(q)
	if err != nil {
		var verr *envelope.ValidationError
		if errors.As(err, &verr) {
			for _, p := range verr.Problems {
				d.Problem += p.Path + ": " + p.Reason + ". "
			}
		}
		c.render(w, http.StatusBadRequest, "deliveries", c.newPage(r, id, "deliveries", "Deliveries", d))
		return
	}
	ds, more, err := c.deps.DB.QueryDeliveries(r.Context(), f, 100)
	if err != nil {
		c.internal(w, r, id, err)
		return
	}
	gists := map[string]gist{}
	for _, del := range ds {
		g, ok := gists[del.EnvelopeID]
		if !ok {
			g = gist{Kind: "message"}
			if rec, err := c.deps.DB.Envelope(r.Context(), del.EnvelopeID); err == nil {
				g = gistOf(rec.Envelope)
			}
			gists[del.EnvelopeID] = g
		}
		row := deliveryRow{Delivery: del, Gist: g}
		if s := del.Extra[envelope.ExtraSubject]; s != "" && del.Channel == envelope.ChannelEmail {
			row.Gist.Text = clip(s, gistRunes)
		}
		if del.Extra[envelope.ExtraTemplate] == "window" {
			row.Gist.Kind = "window template"
		} else if del.Extra[envelope.ExtraConversation] != "" && g.Kind == "message" {
			row.Gist.Kind = "conversation answer"
		}
		d.Deliveries = append(d.Deliveries, row)
	}
	if more && len(ds) > 0 {
		d.Next = ds[len(ds)-1].ID
	}
	c.render(w, http.StatusOK, "deliveries", c.newPage(r, id, "deliveries", "Deliveries", d))
}

// deliveryRow is a delivery in the list, with what it says.
type deliveryRow struct {
	*store.Delivery
	Gist gist
}

// gist tells deliveries apart: their kind and their subject or first text.
type gist struct {
	// Kind: "approval request", "question", "error", "message" (and, for
	// the row, "conversation answer", "window template").
	Kind string
	Text string
}

// gistRunes bounds a gist's text.
const gistRunes = 90

// gistOf reads an envelope for the deliveries list: an approval request's
// summary (or its tool's name), else the first line of the first text.
func gistOf(raw json.RawMessage) gist {
	env, err := envelope.Decode(raw, envelope.Limits{})
	if err != nil {
		return gist{Kind: "message", Text: "(unreadable envelope)"}
	}
	g := gist{Kind: "message"}
	switch env.Meta.FinalizedBy {
	case "error":
		g.Kind = "error"
	case "clarifying":
		g.Kind = "question"
	}
	var first string
	var sawResponse, sawClarify, sawError bool
	for _, p := range env.Parts {
		sawResponse = sawResponse || p.PartType() == envelope.PartResponse
		sawClarify = sawClarify || p.PartType() == envelope.PartClarify
		sawError = sawError || p.PartType() == envelope.PartError
		switch p.PartType() {
		case "approval-request":
			var req envelope.ApprovalRequest
			if json.Unmarshal(p.Data, &req) == nil && g.Kind != "approval request" {
				g.Kind = "approval request"
				g.Text = "Approve: " + firstLine(req.Summary)
				if req.Summary == "" {
					g.Text = "Approve: " + req.ToolName
				}
			}
		case envelope.PartResponse, envelope.PartClarify, envelope.PartError:
			if first == "" {
				first = firstLine(p.TextValue())
			}
		}
	}
	if g.Kind == "message" && !sawResponse && sawError {
		g.Kind = "error"
	} else if g.Kind == "message" && !sawResponse && sawClarify {
		g.Kind = "question"
	}
	if g.Text == "" {
		g.Text = first
	}
	if g.Text == "" {
		g.Text = "(no text)"
	}
	g.Text = clip(g.Text, gistRunes)
	return g
}

// firstLine is the first non-empty line of Markdown text, its emphasis and
// list marks dropped.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(strings.NewReplacer("**", "", "__", "", "`", "").Replace(l))
		l = strings.TrimSpace(strings.TrimLeft(l, "#>-*• "))
		if l != "" {
			return l
		}
	}
	return ""
}

// clip cuts s to n runes, with an ellipsis.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

type deliveryData struct {
	D         *store.Delivery
	Envelope  *store.EnvelopeRecord
	Attempts  []attemptRow
	Rendition *Rendition
	RenderErr string
	Siblings  []*store.Delivery
}

type attemptRow struct {
	store.Attempt
	Receipt string
}

func (c *Console) delivery(w http.ResponseWriter, r *http.Request, id identity) {
	ctx := r.Context()
	d, err := c.deps.DB.Delivery(ctx, r.PathValue("id"))
	if err != nil {
		c.internal(w, r, id, err)
		return
	}
	atts, err := c.deps.DB.Attempts(ctx, d.ID)
	if err != nil {
		c.internal(w, r, id, err)
		return
	}
	data := deliveryData{D: d}
	for i := len(atts) - 1; i >= 0; i-- { // newest first
		a := attemptRow{Attempt: atts[i]}
		if len(a.Attempt.Receipt) > 0 {
			var v any
			if json.Unmarshal(a.Attempt.Receipt, &v) == nil {
				b, _ := json.MarshalIndent(v, "", "  ")
				a.Receipt = string(b)
			}
		}
		data.Attempts = append(data.Attempts, a)
	}
	if rec, err := c.deps.DB.Envelope(ctx, d.EnvelopeID); err == nil {
		data.Envelope = rec
		for _, sid := range rec.DeliveryIDs {
			if sid == d.ID {
				continue
			}
			if s, err := c.deps.DB.Delivery(ctx, sid); err == nil {
				data.Siblings = append(data.Siblings, s)
			}
		}
	}
	if rd, err := c.deps.Renditions.Render(ctx, d); err != nil {
		data.RenderErr = err.Error()
	} else {
		data.Rendition = rd
	}
	c.render(w, http.StatusOK, "delivery", c.newPage(r, id, "deliveries", "Delivery "+d.ID, data))
}

// frame serves the email HTML for the sandboxed iframe: its own policy
// allows inline styles and data: images and nothing else, and only this
// origin may frame it.
func (c *Console) frame(w http.ResponseWriter, r *http.Request, id identity) {
	d, err := c.deps.DB.Delivery(r.Context(), r.PathValue("id"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	rd, err := c.deps.Renditions.Render(r.Context(), d)
	if err != nil || rd.HTML == "" {
		http.Error(w, "no HTML rendition", http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(rd.HTML))
}

// mime serves the raw email as plain text.
func (c *Console) mime(w http.ResponseWriter, r *http.Request, id identity) {
	d, err := c.deps.DB.Delivery(r.Context(), r.PathValue("id"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	rd, err := c.deps.Renditions.Render(r.Context(), d)
	if err != nil || len(rd.MIME) == 0 {
		http.Error(w, "no MIME rendition", http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Disposition", `inline; filename="`+d.ID+`.eml"`)
	_, _ = w.Write(rd.MIME)
}

func (c *Console) retry(w http.ResponseWriter, r *http.Request, id identity) {
	did := r.PathValue("id")
	if _, err := c.deps.DB.Retry(r.Context(), did); err != nil {
		if errors.Is(err, store.ErrBadState) {
			c.fail(w, r, id, http.StatusConflict, "Only dead deliveries can be retried; this one is not dead any more.")
			return
		}
		c.internal(w, r, id, err)
		return
	}
	c.deps.Notify()
	c.log.Info("console retry", "delivery_id", did, "key_id", id.keyID)
	done(w, r, "/ui/deliveries/"+url.PathEscape(did), "retried")
}

// --- bulk retry ---

type bulkData struct {
	Since     string // datetime-local value, UTC
	SinceText string // the same, for a person
	Channel   string
	Channels  []string
	Counted   bool
	Count     int
	More      bool
	Problem   string
}

func parseLocal(v string) (time.Time, bool) {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// bulkRetryPage is the dry run: it counts what a retry would take.
func (c *Console) bulkRetryPage(w http.ResponseWriter, r *http.Request, id identity) {
	q := r.URL.Query()
	d := bulkData{Channel: q.Get("channel"), Channels: c.cfg.Channels,
		Since: c.cfg.Now().Add(-24 * time.Hour).UTC().Format("2006-01-02T15:04")}
	if v := q.Get("since"); v != "" {
		t, ok := parseLocal(v)
		if !ok {
			d.Problem = "The time is not one beachd can read."
			c.render(w, http.StatusBadRequest, "retry", c.newPage(r, id, "deliveries", "Retry dead deliveries", d))
			return
		}
		d.Since, d.SinceText = t.Format("2006-01-02T15:04"), t.Format("2 Jan 2006 15:04 UTC")
		ids, more, err := c.deps.DB.DeadSince(r.Context(), t, d.Channel)
		if err != nil {
			c.internal(w, r, id, err)
			return
		}
		d.Counted, d.Count, d.More = true, len(ids), more
	}
	c.render(w, http.StatusOK, "retry", c.newPage(r, id, "deliveries", "Retry dead deliveries", d))
}

func (c *Console) bulkRetry(w http.ResponseWriter, r *http.Request, id identity) {
	t, ok := parseLocal(r.PostForm.Get("since"))
	if !ok {
		c.fail(w, r, id, http.StatusBadRequest, "The time is not one beachd can read.")
		return
	}
	ch := r.PostForm.Get("channel")
	n, err := c.deps.DB.RetryDeadSince(r.Context(), t, ch)
	if err != nil {
		c.internal(w, r, id, err)
		return
	}
	if n > 0 {
		c.deps.Notify()
	}
	c.log.Info("console bulk retry", "since", t, "channel", ch, "count", n, "key_id", id.keyID)
	done(w, r, "/ui/deliveries?state=dead", "bulk-retried")
}

// --- approvals ---

type approvalsData struct {
	Tab       string
	Approvals []*approvals.View
}

func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request, id identity) {
	tab := r.URL.Query().Get("tab")
	var vs []*approvals.View
	var err error
	switch tab {
	case "decided":
		for _, st := range []string{store.ApprovalGranted, store.ApprovalDenied, store.ApprovalExpired, store.ApprovalVoid} {
			var part []*approvals.View
			if part, err = c.deps.Approvals.List(r.Context(), st, "", 200); err != nil {
				break
			}
			vs = append(vs, part...)
		}
		sort.Slice(vs, func(i, j int) bool { return vs[i].DecidedAt.After(vs[j].DecidedAt) })
	case "injection-dead":
		vs, err = c.deps.Approvals.ListByInjection(r.Context(), "dead", 200)
	default:
		tab = "pending"
		vs, err = c.deps.Approvals.List(r.Context(), store.ApprovalPending, "", 200)
		sort.Slice(vs, func(i, j int) bool { return vs[i].ExpiresAt.Before(vs[j].ExpiresAt) })
	}
	if err != nil {
		c.internal(w, r, id, err)
		return
	}
	c.render(w, http.StatusOK, "approvals", c.newPage(r, id, "approvals", "Approvals", approvalsData{Tab: tab, Approvals: vs}))
}

type approvalData struct {
	V       *approvals.View
	Request envelope.ApprovalRequest
	Args    []approvals.ArgRow
	Pending bool
}

func (c *Console) approval(w http.ResponseWriter, r *http.Request, id identity) {
	v, err := c.deps.Approvals.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		c.internal(w, r, id, err)
		return
	}
	d := approvalData{V: v, Pending: v.State == store.ApprovalPending && c.cfg.Now().Before(v.ExpiresAt)}
	_ = json.Unmarshal(v.Request, &d.Request)
	d.Args = approvals.ArgRows(d.Request.Args)
	c.render(w, http.StatusOK, "approval", c.newPage(r, id, "approvals", "Approval "+v.ID, d))
}

func (c *Console) decide(w http.ResponseWriter, r *http.Request, id identity) {
	aid := r.PathValue("id")
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if len(reason) > 500 {
		c.fail(w, r, id, http.StatusBadRequest, "The reason is longer than 500 characters.")
		return
	}
	_, err := c.deps.Approvals.Decide(r.Context(), aid, r.PostForm.Get("decision"), reason, id.keyID)
	switch {
	case errors.Is(err, store.ErrAlreadyDecided), errors.Is(err, approvals.ErrBadState):
		c.fail(w, r, id, http.StatusConflict, "The approval was already decided (or expired) before your decision arrived.")
		return
	case errors.Is(err, approvals.ErrBadDecision):
		c.fail(w, r, id, http.StatusBadRequest, "Choose approve, deny or withdraw.")
		return
	case err != nil:
		c.internal(w, r, id, err)
		return
	}
	c.log.Info("console decision", "approval_id", aid, "key_id", id.keyID)
	done(w, r, "/ui/approvals/"+url.PathEscape(aid), "decided")
}

func (c *Console) retryInjection(w http.ResponseWriter, r *http.Request, id identity) {
	aid := r.PathValue("id")
	if _, err := c.deps.Approvals.RetryInjection(r.Context(), aid); err != nil {
		if errors.Is(err, approvals.ErrBadState) || errors.Is(err, store.ErrBadState) {
			c.fail(w, r, id, http.StatusConflict, "Only a dead injection can be retried.")
			return
		}
		c.internal(w, r, id, err)
		return
	}
	done(w, r, "/ui/approvals/"+url.PathEscape(aid), "injection-retry")
}

// --- schedules ---

func (c *Console) schedules(w http.ResponseWriter, r *http.Request, id identity) {
	if c.deps.Schedules == nil {
		c.fail(w, r, id, http.StatusNotFound, "Schedules are not set up.")
		return
	}
	ss, err := c.deps.Schedules.List(r.Context())
	if err != nil {
		c.internal(w, r, id, err)
		return
	}
	c.render(w, http.StatusOK, "schedules", c.newPage(r, id, "schedules", "Schedules", ss))
}

func (c *Console) runSchedule(w http.ResponseWriter, r *http.Request, id identity) {
	if c.deps.Schedules == nil {
		c.fail(w, r, id, http.StatusNotFound, "Schedules are not set up.")
		return
	}
	name := r.PathValue("name")
	_, err := c.deps.Schedules.RunNow(r.Context(), name)
	switch {
	case errors.Is(err, schedule.ErrUnknownSchedule):
		c.fail(w, r, id, http.StatusNotFound, "There is no schedule of that name.")
		return
	case errors.Is(err, schedule.ErrBusy):
		c.fail(w, r, id, http.StatusConflict, "The schedule has a run in progress; a schedule never overlaps itself.")
		return
	case errors.Is(err, schedule.ErrNotRunning):
		c.fail(w, r, id, http.StatusServiceUnavailable, "The scheduler is not running yet.")
		return
	case err != nil:
		c.internal(w, r, id, err)
		return
	}
	c.log.Info("console run now", "schedule", name, "key_id", id.keyID)
	done(w, r, "/ui/schedules", "run")
}

// pauseSchedule pauses (pause true) or resumes a schedule; the pause is
// recorded as by "console key" and the operator's key id.
func (c *Console) pauseSchedule(pause bool) func(http.ResponseWriter, *http.Request, identity) {
	return func(w http.ResponseWriter, r *http.Request, id identity) {
		if c.deps.Schedules == nil {
			c.fail(w, r, id, http.StatusNotFound, "Schedules are not set up.")
			return
		}
		name := r.PathValue("name")
		f, verb, flash := c.deps.Schedules.Resume, "resume", "resumed"
		if pause {
			f, verb, flash = c.deps.Schedules.Pause, "pause", "paused"
		}
		_, err := f(r.Context(), name, "console key "+id.keyID)
		switch {
		case errors.Is(err, schedule.ErrUnknownSchedule):
			c.fail(w, r, id, http.StatusNotFound, "There is no schedule of that name.")
			return
		case err != nil:
			c.internal(w, r, id, err)
			return
		}
		c.log.Info("console schedule "+verb, "schedule", name, "key_id", id.keyID)
		done(w, r, "/ui/schedules", flash)
	}
}

// --- webhook endpoints ---

// endpointRow is an endpoint with the URL it delivers to, as shown.
type endpointRow struct {
	webhook.EndpointStatus
	URL string
}

func (c *Console) webhooks(w http.ResponseWriter, r *http.Request, id identity) {
	if c.deps.Webhooks == nil {
		c.fail(w, r, id, http.StatusNotFound, "No webhook endpoints are configured.")
		return
	}
	var rows []endpointRow
	for _, e := range c.deps.Webhooks.Endpoints() {
		rows = append(rows, endpointRow{EndpointStatus: e, URL: displayURL(c.deps.Webhooks.URL(e.Name))})
	}
	c.render(w, http.StatusOK, "webhooks", c.newPage(r, id, "webhooks", "Webhook endpoints", rows))
}

func (c *Console) enableEndpoint(w http.ResponseWriter, r *http.Request, id identity) {
	if c.deps.Webhooks == nil || !c.deps.Webhooks.Enable(r.PathValue("name")) {
		c.fail(w, r, id, http.StatusNotFound, "There is no webhook endpoint of that name.")
		return
	}
	c.log.Info("console enabled endpoint", "endpoint", r.PathValue("name"), "key_id", id.keyID)
	done(w, r, "/ui/webhooks", "enabled")
}

// testEvent queues a small envelope to one endpoint: it goes the way every
// delivery goes (signed, retried, recorded), so its outcome shows in the
// deliveries.
func (c *Console) testEvent(w http.ResponseWriter, r *http.Request, id identity) {
	name := r.PathValue("name")
	known := false
	if c.deps.Webhooks != nil {
		for _, e := range c.deps.Webhooks.Endpoints() {
			known = known || e.Name == name
		}
	}
	if !known || c.deps.Enqueuer == nil {
		c.fail(w, r, id, http.StatusNotFound, "There is no webhook endpoint of that name.")
		return
	}
	now := c.cfg.Now().UTC()
	text := "Test event from the beachd console, sent " + now.Format(time.RFC3339) + "."
	env := &envelope.Envelope{Role: "agent", Parts: envelope.Parts{{Text: &text, Metadata: map[string]any{"partType": "response"}}},
		Meta: envelope.Meta{SessionID: "beachd-console", TurnID: "test-" + c.deps.DB.NewID(""), ProducedAt: now, FinalizedBy: "complete"}}
	envID, err := c.deps.Enqueuer.Enqueue(r.Context(), env, []envelope.Recipient{{Channel: envelope.ChannelWebhook, Endpoint: name}}, "", "console")
	if err != nil {
		c.internal(w, r, id, err)
		return
	}
	c.log.Info("console test event", "endpoint", name, "envelope_id", envID, "key_id", id.keyID)
	done(w, r, "/ui/deliveries?channel=webhook&to="+url.QueryEscape(name), "test-sent")
}
