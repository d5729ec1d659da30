package conversations

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/outbox"
	"github.com/cool-ai/beachd/store"
)

// Run is the turn outbox worker: it claims due turns (at most one in
// flight per conversation), sends each to its agent, waits for the answer
// (TurnTimeout) and ingests it as a delivery to the conversation. A failed
// attempt is retried with exponential backoff and jitter; a turn is
// dead-lettered when its next attempt would come after Lifetime (or after
// MaxAttempts attempts, when set) or at once on a permanent agent
// error (RetryTurn brings it back). Alone on its store, it makes due at
// start every turn a previous process held; on a shared store, where other
// replicas' claims are live, it makes due the turns whose lease ran out, at
// start and every 10 s. It returns when ctx ends.
func (r *Router) Run(ctx context.Context) error {
	var requeue func(context.Context)
	if r.cfg.Shared {
		requeue = r.requeueExpired
	} else if n, err := r.db.RequeueClaimedTurns(ctx, r.start, r.cfg.Now()); err != nil {
		return err
	} else if n > 0 {
		r.log.Info("conversation turns requeued after restart", "count", n)
	}
	return outbox.Loop[*store.Turn]{
		Requeue: requeue,
		Workers: r.cfg.Workers,
		Claim: func(ctx context.Context, n int) ([]*store.Turn, error) {
			return r.db.ClaimTurns(ctx, r.cfg.Now(), n, r.cfg.Lease)
		},
		Attempt:     r.attempt,
		Next:        r.db.NextTurn,
		Now:         r.cfg.Now,
		Wake:        r.wake,
		Poke:        r.Wake,
		ClaimFailed: func(err error) { r.log.Error("claim conversation turns", "err", err) },
	}.Run(ctx)
}

// requeueExpired makes due the turns whose lease ran out (a replica that
// died held them): RequeueClaimedTurns takes the turns claimed (UpdatedAt)
// before its bound, here more than a lease ago.
func (r *Router) requeueExpired(ctx context.Context) {
	now := r.cfg.Now()
	n, err := r.db.RequeueClaimedTurns(ctx, now.Add(-r.cfg.Lease), now)
	switch {
	case err != nil && ctx.Err() == nil:
		r.log.Error("requeue conversation turns whose lease ran out", "err", err)
	case n > 0:
		r.log.Warn("conversation turns whose lease ran out requeued", "count", n)
	}
}

// RetryTurn makes a dead turn due again now (operator action).
func (r *Router) RetryTurn(ctx context.Context, id string) (*store.Turn, error) {
	t, err := r.db.RetryTurn(ctx, id, r.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("turn %q: %w", id, ErrNotFound)
	}
	if err == nil {
		r.Wake()
	}
	return t, err
}

// Turns lists turns, optionally in one state (queued, sending, answered,
// dead), oldest first.
func (r *Router) Turns(ctx context.Context, state string, limit int) ([]*store.Turn, error) {
	return r.db.ListTurns(ctx, state, limit)
}

// watch returns a channel that receives the state of the next outcome
// recorded for turn id (tests).
func (r *Router) watch(id string) <-chan string {
	ch := make(chan string, 1)
	r.mu.Lock()
	if r.watchers == nil {
		r.watchers = map[string][]chan string{}
	}
	r.watchers[id] = append(r.watchers[id], ch)
	r.mu.Unlock()
	return ch
}

func (r *Router) notifyWatchers(id, state string) {
	r.mu.Lock()
	ws := r.watchers[id]
	delete(r.watchers, id)
	r.mu.Unlock()
	for _, w := range ws {
		w <- state
	}
}

// permanentError is a failure retrying cannot fix (the turn is
// dead-lettered at once).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func (r *Router) attempt(ctx context.Context, t *store.Turn) {
	var envID, answeredBy string
	var err error
	channel := ""
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("conversation worker panicked: %v", p)
			}
		}()
		envID, channel, answeredBy, err = r.run(ctx, t)
	}()
	if ctx.Err() != nil && err != nil {
		return // shutting down: the lease runs out and the turn is taken again
	}
	now := r.cfg.Now()
	o := store.TurnOutcome{State: store.TurnAnswered, At: now, AnswerEnvelopeID: envID, AnsweredBy: answeredBy}
	var perm *permanentError
	if err != nil {
		o.Error = clip(err.Error(), 2000)
		switch {
		case agent.IsPermanent(err) || errors.As(err, &perm):
			o.State, o.Error = store.TurnDead, "permanent: "+o.Error
		case r.cfg.MaxAttempts > 0 && t.Attempts >= r.cfg.MaxAttempts:
			o.State, o.Error = store.TurnDead, fmt.Sprintf("gave up after %d attempts: %s", t.Attempts, o.Error)
		default:
			o.State, o.NextAt = store.TurnQueued, now.Add(r.backoff(t.Attempts))
			if o.NextAt.After(t.CreatedAt.Add(r.cfg.Lifetime)) {
				o.State, o.NextAt = store.TurnDead, time.Time{}
				o.Error = fmt.Sprintf("gave up after %d attempts in %s: %s", t.Attempts, now.Sub(t.CreatedAt).Round(time.Second), o.Error)
			}
		}
	}
	if _, rerr := r.db.RecordTurn(context.WithoutCancel(ctx), t, o); rerr != nil {
		if !errors.Is(rerr, store.ErrLeaseLost) {
			r.log.Error("record conversation turn", "turn_id", t.ID, "err", rerr)
		}
		return
	}
	r.notifyWatchers(t.ID, o.State)
	attrs := []any{"turn_id", t.ID, "conversation_id", t.ConversationID, "agent", t.Agent, "attempt", t.Attempts}
	switch o.State {
	case store.TurnAnswered:
		r.cfg.Metrics.observeTurn(channel, "answered")
		r.log.Info("conversation turn answered", append(attrs, "envelope_id", envID)...)
	case store.TurnDead:
		r.cfg.Metrics.observeTurn(channel, "dead")
		r.log.Error("conversation turn dead-lettered", append(attrs, "err", o.Error)...)
	default:
		r.cfg.Metrics.observeTurn(channel, "retry")
		r.log.Warn("conversation turn failed; will retry", append(attrs, "next", o.NextAt, "err", o.Error)...)
	}
}

// resumer is an Agent that resumes a turn a previous process left in
// flight under its push id (agent.Client.ResumeTurn).
type resumer interface {
	ResumeTurn(ctx context.Context, agentName, contextID, taskID, pushID string) *agent.Turn
}

var _ resumer = (*agent.Client)(nil)

// run sends the turn (or, after a restart, polls the task it already
// started), waits for the answer and ingests it. answeredBy says how the
// answer arrived (agent.AnsweredBy*).
func (r *Router) run(ctx context.Context, t *store.Turn) (envID, channel, answeredBy string, err error) {
	if r.ag == nil {
		return "", "", "", &permanentError{errors.New("no agent client configured")}
	}
	c, err := r.db.Conversation(ctx, t.ConversationID)
	if err != nil {
		return "", "", "", fmt.Errorf("conversation %s: %w", t.ConversationID, err)
	}
	channel = c.Channel
	rec, err := r.db.InboundRecord(ctx, t.InboundID)
	if err != nil {
		return "", channel, "", fmt.Errorf("inbound %s: %w", t.InboundID, err)
	}
	var turn *agent.Turn
	if t.TaskID != "" {
		if ra, ok := r.ag.(resumer); ok {
			// Under the push id the turn started with: the agent's pushes
			// after the restart answer it.
			turn = ra.ResumeTurn(ctx, t.Agent, c.ID, t.TaskID, t.PushID)
		} else {
			turn = &agent.Turn{ContextID: c.ID, TaskID: t.TaskID}
		}
	} else {
		msg, err := r.buildMessage(ctx, c, rec, t)
		if err != nil {
			return "", channel, "", err
		}
		turn, err = r.ag.SendMessage(ctx, t.Agent, msg)
		if err != nil {
			return "", channel, "", err
		}
		r.cfg.Metrics.observeTurn(channel, "started")
		if turn.Task != nil && turn.TaskID != "" {
			if err := r.db.SetTurnTask(ctx, t, turn.TaskID, turn.PushID); err != nil {
				return "", channel, "", err
			}
		}
	}
	wctx, cancel := context.WithTimeout(ctx, r.cfg.TurnTimeout)
	defer cancel()
	env, err := r.ag.WaitTurn(wctx, t.Agent, turn, r.cfg.Poll)
	if err != nil {
		return "", channel, "", err
	}
	envID, err = r.answer(ctx, c, t, env)
	answeredBy = turn.AnsweredBy
	if err == nil {
		r.log.Info("conversation turn's answer arrived", "turn_id", t.ID, "task_id", turn.TaskID,
			"answered_by", turn.AnsweredBy, "push_id", turn.PushID)
	}
	return envID, channel, answeredBy, err
}

// buildMessage is the A2A message of a turn: the trimmed text (its
// metadata carrying the full text and subject), the attachments as file
// parts (inline up to AttachmentInlineMax, larger as signed URLs) and
// metadata "beach" {channel, from, to, subject, conversationId, messageId}.
func (r *Router) buildMessage(ctx context.Context, c *store.Conversation, rec *store.InboundRecord, t *store.Turn) (*agent.Message, error) {
	text := strings.TrimSpace(rec.Text)
	full := rec.FullText
	if full == "" {
		full = rec.Text
	}
	if text == "" {
		text = strings.TrimSpace(full)
	}
	meta := map[string]any{"fullText": full}
	if rec.Subject != "" {
		meta["subject"] = rec.Subject
	}
	parts := agent.Parts{agent.TextPart(text, meta)}
	var budget int64 = store.MaxInboundAttachmentBytes
	var missing []missingAttachment
	for i, a := range rec.Attachments {
		if !a.Stored && a.URL != "" && a.Note == "" && r.cfg.Media != nil {
			if budget <= 0 {
				a.Note = "not fetched: the message's other attachments reached the 25 MiB bound"
			} else {
				fetched, err := r.fetchMedia(ctx, rec, t, i, &a, budget)
				if err != nil {
					return nil, err
				}
				if fetched {
					a.Stored = true
				}
			}
		}
		if !a.Stored {
			if a.Note != "" {
				missing = append(missing, missingAttachment{Index: i, Filename: a.Filename, MediaType: a.MediaType, Reason: a.Note})
			}
			continue
		}
		budget -= a.Size
		p := agent.Part{Filename: a.Filename, MediaType: a.MediaType}
		if p.MediaType == "" {
			p.MediaType = "application/octet-stream"
		}
		if a.Size <= r.cfg.AttachmentInlineMax {
			data, err := r.db.InboundAttachment(ctx, rec.ID, i)
			if err != nil {
				return nil, fmt.Errorf("attachment %d of %s: %w", i, rec.ID, err)
			}
			p.Raw = data
		} else {
			p.URL = r.AttachmentURL(rec.ID, i, r.cfg.Now().Add(r.cfg.AttachmentURLTTL))
		}
		parts = append(parts, p)
	}
	if len(missing) > 0 {
		parts = append(parts, agent.TextPart(missingText(missing, len(rec.Attachments)), map[string]any{"beachNote": "attachments-missing"}))
	}
	beach := map[string]any{"channel": rec.Channel, "from": rec.From, "to": c.OurAddress, "conversationId": c.ID,
		"messageId": rec.MessageID}
	if rec.Subject != "" {
		beach["subject"] = rec.Subject
	}
	if len(missing) > 0 {
		beach["attachmentsMissing"] = missing
	}
	return &agent.Message{MessageID: t.MessageID, ContextID: c.ID, Role: agent.RoleUser, Parts: parts,
		Metadata: map[string]any{"beach": beach}}, nil
}

// missingAttachment is an attachment a turn goes without, as the turn's
// metadata (beach.attachmentsMissing) lists it.
type missingAttachment struct {
	Index     int    `json:"index"`
	Filename  string `json:"filename,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
	Reason    string `json:"reason"`
}

// missingText is the note a turn carries, after the person's text, about
// the attachments it goes without.
func missingText(missing []missingAttachment, total int) string {
	var b strings.Builder
	for i, m := range missing {
		if i > 0 {
			b.WriteString("\n")
		}
		what := m.Filename
		if what == "" {
			what = m.MediaType
		}
		if what == "" {
			what = "no name"
		}
		fmt.Fprintf(&b, "[Attachment %d of %d (%s) is not included: %s.]", m.Index+1, total, what, m.Reason)
	}
	return b.String()
}

// fetchMedia fetches attachment i of rec from its provider URL into the
// store and sets a's size and media type; it reports whether it fetched
// it. A failure that no later fetch can mend (a 4xx, a refused address,
// too large) is noted on the attachment, and the turn goes on without it.
// Another failure (a 5xx, a timeout) is counted and returned, so that the
// turn is retried with its backoff, until the item failed MediaAttempts
// times or MediaRetryFor has passed since the message came: then it is
// noted as well and the turn goes on without it.
func (r *Router) fetchMedia(ctx context.Context, rec *store.InboundRecord, t *store.Turn, i int, a *store.AttachmentInfo, budget int64) (bool, error) {
	data, mt, err := r.cfg.Media.FetchMedia(ctx, a.URL, budget)
	if err == nil {
		if err := r.db.PutInboundAttachment(ctx, rec.ID, i, data); err != nil {
			return false, err
		}
		a.Size = int64(len(data))
		if a.MediaType == "" {
			a.MediaType = mt
		}
		return true, nil
	}
	if ctx.Err() != nil {
		return false, err // shutting down: the turn is taken again
	}
	reason, permanent := "the fetch failed", false
	var mf MediaFailure
	if errors.As(err, &mf) {
		reason, permanent = mf.MediaReason(), mf.MediaPermanent()
	}
	failures := a.FetchFailures + 1
	note := ""
	switch {
	case permanent:
		note = "could not be fetched: " + reason
	case failures >= r.cfg.MediaAttempts || !r.cfg.Now().Before(rec.ReceivedAt.Add(r.cfg.MediaRetryFor)):
		note = fmt.Sprintf("could not be fetched: %s (%d tries)", reason, failures)
	}
	if nerr := r.db.NoteInboundAttachment(ctx, rec.ID, i, failures, note); nerr != nil {
		return false, nerr
	}
	a.FetchFailures = failures
	attrs := []any{"inbound_id", rec.ID, "turn_id", t.ID, "attachment", i, "failures", failures, "err", err}
	if note == "" {
		r.log.Warn("conversation media fetch failed; the turn will try again", attrs...)
		return false, fmt.Errorf("fetch media %d of %s (try %d of %d): %w", i, rec.ID, failures, r.cfg.MediaAttempts, err)
	}
	r.log.Warn("conversation media not fetched; the turn goes on without it", append(attrs, "reason", reason)...)
	a.Note = note
	return false, nil
}

// answer ingests the agent's answer as one delivery to the conversation:
// to the person who wrote last, from the agent's address they wrote to,
// threaded (email: Re: subject, In-Reply-To, References). An answer
// without a text part, or of a failed task, is stored but sends nothing
// (an empty message helps nobody; the failure text is the operator's). A
// WhatsApp answer outside the 24-hour window is stored held, with a
// window-template delivery that invites the person to write again; their
// next message releases it. The ingest's idempotency key is the turn's, so
// an attempt repeated after a crash stores nothing twice.
func (r *Router) answer(ctx context.Context, c *store.Conversation, t *store.Turn, env *envelope.Envelope) (string, error) {
	body, err := json.Marshal(env)
	if err != nil {
		return "", &permanentError{fmt.Errorf("encode the answer: %w", err)}
	}
	var dels []store.NewDelivery
	if env.Meta.FinalizedBy != "error" && hasText(env) {
		nd, err := r.resolve(c)
		if err != nil {
			return "", err
		}
		dels = append(dels, nd)
		if nd.Held {
			dels = append(dels, nd.WindowTemplate())
		}
	}
	key := "conversation-answer/" + t.ID
	if r.cfg.Enqueue != nil && len(dels) > 0 {
		id, err := r.cfg.Enqueue.EnqueueKeyed(ctx, env, []envelope.Recipient{{Conversation: c.ID}}, t.Agent, "conversation", key)
		var ve *envelope.ValidationError
		if errors.As(err, &ve) {
			// The answer breaks a rule of this configuration (e.g. an
			// approval-request to someone who is not an approver): no
			// retry can fix it.
			return "", &permanentError{fmt.Errorf("the answer was refused: %w", err)}
		} else if err != nil {
			return "", fmt.Errorf("ingest the answer: %w", err)
		}
		return id, nil
	}
	res, err := r.db.Ingest(ctx, store.Ingest{Envelope: body, Agent: t.Agent, Source: "conversation",
		Deliveries: dels, IdempotencyKey: key, RequestHash: sha256.Sum256([]byte(key))})
	if err != nil {
		return "", fmt.Errorf("ingest the answer: %w", err)
	}
	if len(dels) > 0 {
		r.notify()
	}
	return res.EnvelopeID, nil
}

func hasText(env *envelope.Envelope) bool {
	for _, p := range env.Parts {
		if p.Text != nil && strings.TrimSpace(*p.Text) != "" {
			return true
		}
	}
	return false
}

// resolve is where a message to conversation c goes now.
func (r *Router) resolve(c *store.Conversation) (store.NewDelivery, error) {
	to := c.LastFrom
	if to == "" && len(c.Participants) > 0 {
		to = c.Participants[0]
	}
	if to == "" {
		return store.NewDelivery{}, &permanentError{fmt.Errorf("conversation %s has no participant to answer", c.ID)}
	}
	nd := store.NewDelivery{Channel: c.Channel, To: to,
		Extra: map[string]string{envelope.ExtraConversation: c.ID, envelope.ExtraFrom: c.OurAddress}}
	if classOf(c.Channel) == envelope.ClassChat {
		// The answer goes into the conversation's Slack thread.
		if ch, ts, ok := strings.Cut(c.OurAddress, "/"); ok && ch != "" && ts != "" {
			nd.To, nd.Extra[envelope.ExtraThreadTS] = ch, ts
		}
	}
	if classOf(c.Channel) == envelope.ClassEmail {
		if s := replySubject(c.Subject); s != "" {
			nd.Extra[envelope.ExtraSubject] = s
		}
		if c.LastInboundMessageID != "" {
			nd.Extra[envelope.ExtraInReplyTo] = c.LastInboundMessageID
		}
		if len(c.MessageIDs) > 0 {
			refs := make([]string, len(c.MessageIDs))
			for i, id := range c.MessageIDs {
				refs[i] = "<" + id + ">"
			}
			nd.Extra[envelope.ExtraReferences] = strings.Join(refs, " ")
		}
	}
	if w := inboundOf(c.Channel).Window; w > 0 {
		nd.Held = !r.cfg.Now().Before(c.LastInboundAt.Add(w))
	}
	return nd, nil
}

// backoff is MinBackoff·2^(attempt-1), capped at MaxBackoff, with ±20% jitter.
func (r *Router) backoff(attempt int) time.Duration {
	d := r.cfg.MinBackoff
	for i := 1; i < attempt && d < r.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.cfg.MaxBackoff)
	var b [8]byte
	if _, err := io.ReadFull(r.cfg.Rand, b[:]); err == nil {
		f := float64(binary.BigEndian.Uint64(b[:])>>11)/float64(1<<53)*0.4 - 0.2
		d += time.Duration(float64(d) * f)
	}
	return d
}
