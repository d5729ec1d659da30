package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// The confirmation page. GET and HEAD only show; the decision is a POST from
// one of two plain HTML forms, Approve and Deny, each with its own hidden
// decision (no JavaScript; a POST naming both decisions decides nothing). The form carries a page
// nonce — HMAC(key, token, time shown) — so a POST is accepted only from a
// page beachd rendered for that token within PageLifetime; the token in the
// path is itself a 128-bit secret. Each nonce decides at most once (it is
// the message id of the decision). Responses forbid framing, caching,
// referrers and every script (Content-Security-Policy).

// PageLifetime is how long a rendered confirmation page can be submitted.
const PageLifetime = 24 * time.Hour

// LinkHandler serves GET, HEAD and POST /a/{token}. The token is read from
// the request's path value "token".
func (s *Service) LinkHandler() http.Handler {
	sum := sha256.Sum256([]byte(pageCSS))
	csp := "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Robots-Tag", "noindex")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			s.showPage(w, r, "")
		case http.MethodPost:
			s.postPage(w, r)
		default:
			h.Set("Allow", "GET, HEAD, POST")
			s.writePage(w, http.StatusMethodNotAllowed, pageData{Title: "Not allowed"})
		}
	})
}

func (s *Service) writePage(w http.ResponseWriter, status int, d pageData) {
	d.CSS = template.CSS(pageCSS)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = pageTmpl.Execute(w, d)
}

var invalidLink = pageData{Title: "This link is not valid",
	Message: "The approval link is not valid. It may have been mistyped or withdrawn."}

// mailLinksOff answers a link sent by mail once approvals.email_links is
// off.
var mailLinksOff = pageData{Title: "Please answer by email",
	Message: "Answers through this page are turned off for requests sent by email. Reply to the message instead: approve or deny on the first line."}

// lookupLink resolves a link token without side effects; it returns the
// token, the approval and the recipient the link was issued to, or the
// page to show instead.
func (s *Service) lookupLink(r *http.Request) (string, *store.Approval, string, *pageData) {
	tok, ok := ParseToken(r.PathValue("token"))
	if !ok {
		return "", nil, "", &invalidLink
	}
	b, err := s.db.TokenBinding(r.Context(), linkKey(tok))
	if err != nil || b.Kind != KindLink {
		return "", nil, "", &invalidLink
	}
	a, err := s.db.Approval(r.Context(), b.ApprovalID)
	if err != nil {
		return "", nil, "", &invalidLink
	}
	if exp, ok := s.expected(b, a); !ok || !equalConstantTime(exp, tok) {
		return "", nil, "", &invalidLink
	}
	if !s.linksFor(b.Channel) {
		return "", nil, "", &mailLinksOff
	}
	return tok, a, b.Recipient, nil
}

// pageDecision says how a decided approval was decided without naming
// other people: whoever holds the link sees "you", "another person who
// was asked", "an operator" or "policy".
func pageDecision(a *store.Approval, viewer string) string {
	who := "another person who was asked"
	switch {
	case a.DecidedBy == viewer:
		who = "you"
	case a.Policy != "" && strings.HasPrefix(a.DecidedBy, "policy:"+a.Policy):
		who = "the people asked under policy " + a.Policy
	case a.Channel == ChannelOperator:
		who = "an operator"
	}
	at := a.DecidedAt.UTC().Format("2 Jan 2006 15:04 MST")
	switch a.State {
	case store.ApprovalGranted:
		return "Approved by " + who + " at " + at + "."
	case store.ApprovalDenied:
		return "Denied by " + who + " at " + at + "."
	case store.ApprovalExpired:
		return "Expired at " + at + " (denied by policy)."
	}
	return "Withdrawn at " + at + "."
}

// injectionNote says whether a decision reached the agent, so that the
// page never lets a decision that had no effect look as if it had.
func (s *Service) injectionNote(ctx context.Context, a *store.Approval) string {
	if a.InjectionID == "" {
		return ""
	}
	inj, err := s.db.Injection(ctx, a.InjectionID)
	if err != nil {
		return ""
	}
	switch inj.State {
	case store.InjectionDone:
		return " The decision was passed to the agent."
	case store.InjectionDead:
		return " The decision could not be passed to the agent (the request may no longer be waiting for an answer), so it has had no effect. The operator has been alerted."
	}
	return " The agent has not confirmed the decision yet."
}

// peopleAsked counts the people an approval was asked of: its recipients,
// one per address (a number asked by SMS and by WhatsApp is one person).
func peopleAsked(rs []store.ApprovalRecipient) int {
	seen := map[string]bool{}
	for _, r := range rs {
		seen[strings.ToLower(strings.TrimPrefix(r.Address, "whatsapp:"))] = true
	}
	return len(seen)
}

func (s *Service) showPage(w http.ResponseWriter, r *http.Request, message string) {
	tok, a, viewer, refused := s.lookupLink(r)
	if refused != nil {
		s.writePage(w, http.StatusNotFound, *refused)
		return
	}
	now := s.cfg.Now()
	var req envelope.ApprovalRequest
	_ = json.Unmarshal(a.Request, &req)
	d := pageData{Title: "Approval request", Message: message, Approval: true, Summary: Summary(a), Tool: req.ToolName,
		Organisation: s.cfg.Organisation, Expires: a.ExpiresAt.UTC().Format("Mon 2 Jan 2006 15:04 MST"), ArgRows: ArgRows(req.Args),
		TimeLeft: TimeLeft(a.ExpiresAt.Sub(now)), StateClass: stateClass(a.State), Asked: peopleAsked(a.Recipients)}
	d.Why, d.AgentMessage, d.ToolTitle = s.requestContext(r.Context(), a)
	d.Action = d.ToolTitle
	if d.Action == "" {
		d.Action = humanName(req.ToolName)
	}
	if req.Summary == "" {
		d.Summary = "Run " + req.ToolName
		if d.ToolTitle != "" {
			d.Summary = d.ToolTitle
		}
	}
	// An approval past its expiry is shown as expired even before the
	// sweeper ran; GET never changes state.
	d.Pending = a.State == store.ApprovalPending && now.Before(a.ExpiresAt)
	switch {
	case d.Pending && a.Quorum > 0 && a.Voted(viewerPerson(a, viewer)):
		d.Pending = false
		d.Decision = "Your vote is recorded: " + tallyText(a)
	case d.Pending:
		d.Nonce = s.m.pageNonce(tok, now.Unix())
	case a.State == store.ApprovalPending:
		d.StateClass = "expired"
		d.Decision = "Expired at " + a.ExpiresAt.UTC().Format("2 Jan 2006 15:04 MST")
	default:
		d.Decision = pageDecision(a, viewer) + s.injectionNote(r.Context(), a)
		d.Title = "Approval request: " + map[string]string{store.ApprovalGranted: "approved", store.ApprovalDenied: "denied",
			store.ApprovalExpired: "expired", store.ApprovalVoid: "withdrawn"}[a.State]
	}
	s.writePage(w, http.StatusOK, d)
}

func (s *Service) postPage(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		if u, err := url.Parse(o); err != nil || !strings.EqualFold(u.Host, r.Host) && !s.publicHost(u.Host) {
			s.writePage(w, http.StatusForbidden, pageData{Title: "Not allowed", Message: "This form was not submitted from this site."})
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		s.writePage(w, http.StatusBadRequest, pageData{Title: "Bad request", Message: "The form could not be read."})
		return
	}
	tok, a, _, refused := s.lookupLink(r)
	if refused != nil {
		s.writePage(w, http.StatusNotFound, *refused)
		return
	}
	nonce := r.PostForm.Get("nonce")
	if !s.validPageNonce(tok, nonce) {
		s.writePage(w, http.StatusForbidden, pageData{Title: "Please try again",
			Message: "This page is out of date. Open the link from your message again."})
		return
	}
	// Exactly one decision: a form that sends both (or neither) decides nothing.
	decision := ""
	if ds := r.PostForm["decision"]; len(ds) == 1 {
		decision = ds[0]
	}
	if decision != envelope.DecisionGranted && decision != envelope.DecisionDenied {
		s.writePage(w, http.StatusBadRequest, pageData{Title: "Bad request", Message: "Choose Approve or Deny."})
		return
	}
	_, err := s.HandleInbound(r.Context(), envelope.Inbound{Channel: ChannelLink, Token: tok, TokenSource: "link",
		MessageID: "page:" + nonce, Decision: decision, Reason: r.PostForm.Get("reason"), ReceivedAt: s.cfg.Now(),
		Evidence: map[string]string{"userAgent": r.UserAgent()}})
	if err != nil {
		s.log.Error("link decision", "approval_id", a.ID, "err", err)
		s.writePage(w, http.StatusInternalServerError, pageData{Title: "Something went wrong", Message: "Your answer was not recorded. Please try again."})
		return
	}
	// Post/redirect/get: the page shows the outcome.
	http.Redirect(w, r, r.URL.Path, http.StatusSeeOther)
}

func (s *Service) publicHost(host string) bool {
	u, err := url.Parse(s.cfg.PublicURL)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

func (s *Service) validPageNonce(tok, nonce string) bool {
	ts, _, ok := strings.Cut(nonce, ".")
	if !ok {
		return false
	}
	issued, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	age := s.cfg.Now().Sub(time.Unix(issued, 0))
	if age < -time.Minute || age > PageLifetime {
		return false
	}
	return equalConstantTime(s.m.pageNonce(tok, issued), nonce)
}
