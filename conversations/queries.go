package conversations

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// InboundFilter selects inbound records (empty fields match all). After is
// the cursor a previous page returned.
type InboundFilter struct {
	Disposition, Channel, Agent string
	Limit                       int
	After                       string
}

// ConversationFilter selects conversations.
type ConversationFilter struct {
	Agent, Channel string
	Limit          int
	After          string
}

// ConversationDetail is a conversation with its messages both ways.
type ConversationDetail struct {
	Conversation *store.Conversation
	Messages     []Message
	// WindowOpen (WhatsApp): the person wrote within 24 hours, so answers go
	// out as they are; WindowClosesAt is when that ends.
	WindowOpen     bool
	WindowClosesAt time.Time
}

// Message is one message of a conversation: "in" (an inbound record) or
// "out" (a delivery; State is its delivery state).
type Message struct {
	At         time.Time
	Direction  string
	InboundID  string
	DeliveryID string
	Text       string
	State      string
	// AnsweredBy ("in"): how the agent's answer to this message arrived —
	// send, push or poll — once its turn is answered.
	AnsweredBy string
}

// Bounds of the queries.
const (
	defaultLimit        = 50
	maxLimit            = 500
	maxScan             = 10000
	maxDetailMessages   = 500
	maxDeliveryTextSize = 4096
)

func pageLimit(n int) int {
	if n <= 0 {
		return defaultLimit
	}
	return min(n, maxLimit)
}

// ListInbound lists inbound records newest first. next is the cursor of
// the next page ("" at the end).
func (r *Router) ListInbound(ctx context.Context, f InboundFilter) ([]*store.InboundRecord, string, error) {
	limit := pageLimit(f.Limit)
	recs, err := r.db.ListInboundRecords(ctx, f.After, limit+1, maxScan, func(rec *store.InboundRecord) bool {
		return (f.Disposition == "" || rec.Disposition == f.Disposition) && (f.Channel == "" || rec.Channel == f.Channel) &&
			(f.Agent == "" || rec.Agent == f.Agent)
	})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(recs) > limit {
		recs = recs[:limit]
		next = recs[limit-1].ID
	}
	return recs, next, nil
}

// ListConversations lists conversations most recently active first (the
// latest message either way); next is an opaque cursor.
func (r *Router) ListConversations(ctx context.Context, f ConversationFilter) ([]*store.Conversation, string, error) {
	limit := pageLimit(f.Limit)
	cs, err := r.db.ListConversations(ctx, f.After, limit+1, maxScan, func(c *store.Conversation) bool {
		return (f.Agent == "" || c.Agent == f.Agent) && (f.Channel == "" || c.Channel == f.Channel)
	})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(cs) > limit {
		cs = cs[:limit]
		next = store.ConversationCursor(cs[limit-1])
	}
	return cs, next, nil
}

// Conversation returns a conversation with its latest messages (at most
// 500) both ways.
func (r *Router) Conversation(ctx context.Context, id string) (*ConversationDetail, error) {
	c, err := r.conversation(ctx, id)
	if err != nil {
		return nil, err
	}
	idx, err := r.db.ConversationMessages(ctx, id, maxDetailMessages)
	if err != nil {
		return nil, err
	}
	d := &ConversationDetail{Conversation: c}
	for _, m := range idx {
		msg := Message{At: m.At, Direction: m.Direction}
		if m.Direction == "in" {
			rec, err := r.db.InboundRecord(ctx, m.ID)
			if err != nil {
				continue // pruned
			}
			msg.InboundID, msg.Text, msg.State = rec.ID, rec.Text, rec.Disposition
			if rec.TurnID != "" {
				if t, err := r.db.Turn(ctx, rec.TurnID); err == nil {
					msg.AnsweredBy = t.AnsweredBy
				}
			}
		} else {
			del, err := r.db.Delivery(ctx, m.ID)
			if err != nil {
				continue // pruned
			}
			msg.DeliveryID, msg.State = del.ID, string(del.State)
			if t := del.Extra[envelope.ExtraTemplate]; t != "" {
				msg.Text = "(" + t + " template)"
			} else if rec, err := r.db.Envelope(ctx, del.EnvelopeID); err == nil {
				if env, err := envelope.Decode(rec.Envelope, envelope.DefaultLimits); err == nil {
					msg.Text = clip(envelopeText(env), maxDeliveryTextSize)
				}
			}
		}
		d.Messages = append(d.Messages, msg)
	}
	if w := inboundOf(c.Channel).Window; w > 0 && !c.LastInboundAt.IsZero() {
		d.WindowClosesAt = c.LastInboundAt.Add(w)
		d.WindowOpen = r.cfg.Now().Before(d.WindowClosesAt)
	}
	return d, nil
}

func envelopeText(env *envelope.Envelope) string {
	s := ""
	for _, p := range env.Parts {
		if p.Text != nil {
			if s != "" {
				s += "\n"
			}
			s += *p.Text
		}
	}
	return s
}

func (r *Router) conversation(ctx context.Context, id string) (*store.Conversation, error) {
	c, err := r.db.Conversation(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("conversation %q: %w", id, ErrNotFound)
	}
	return c, err
}

// Resolve is where a delivery to conversation id goes now: its channel,
// the person who wrote last, the Extra that threads it, and Held when
// WhatsApp's window is closed (NewDelivery.WindowTemplate is the delivery
// that should go with a held one).
func (r *Router) Resolve(ctx context.Context, id string) (store.NewDelivery, error) {
	c, err := r.conversation(ctx, id)
	if err != nil {
		return store.NewDelivery{}, err
	}
	return r.resolve(c)
}

// AttachmentURL is the signed URL of attachment n of an inbound message,
// valid until expires: <AttachmentURLBase>/v1/inbound/{id}/attachments/{n}?expires=&sig=.
func (r *Router) AttachmentURL(inboundID string, n int, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return fmt.Sprintf("%s/v1/inbound/%s/attachments/%d?expires=%s&sig=%s", r.cfg.AttachmentURLBase, inboundID, n, exp,
		r.attachmentSig(inboundID, n, exp))
}

func (r *Router) attachmentSig(inboundID string, n int, expires string) string {
	m := hmac.New(sha256.New, r.cfg.URLKey)
	fmt.Fprintf(m, "beachd-attachment\x00%s\x00%d\x00%s", inboundID, n, expires)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// OpenAttachment checks a signed attachment URL's expires and sig and
// returns the attachment. A wrong or expired signature is ErrBadSignature,
// checked before anything is looked up; a missing attachment ErrNotFound.
func (r *Router) OpenAttachment(ctx context.Context, inboundID string, n int, expires, sig string) (filename, mediaType string, data []byte, err error) {
	if len(inboundID) > 64 || len(expires) > 20 || len(sig) > 64 || n < 0 || n >= store.MaxInboundAttachments || len(r.cfg.URLKey) == 0 {
		return "", "", nil, ErrBadSignature
	}
	exp, perr := strconv.ParseInt(expires, 10, 64)
	want := r.attachmentSig(inboundID, n, expires)
	if perr != nil || !hmac.Equal([]byte(want), []byte(sig)) {
		return "", "", nil, ErrBadSignature
	}
	if !r.cfg.Now().Before(time.Unix(exp, 0)) {
		return "", "", nil, ErrBadSignature
	}
	rec, err := r.db.InboundRecord(ctx, inboundID)
	if errors.Is(err, store.ErrNotFound) || err == nil && n >= len(rec.Attachments) {
		return "", "", nil, fmt.Errorf("inbound %s attachment %d: %w", inboundID, n, ErrNotFound)
	}
	if err != nil {
		return "", "", nil, err
	}
	data, err = r.db.InboundAttachment(ctx, inboundID, n)
	if errors.Is(err, store.ErrNotFound) {
		return "", "", nil, fmt.Errorf("inbound %s attachment %d has no stored bytes: %w", inboundID, n, ErrNotFound)
	}
	if err != nil {
		return "", "", nil, err
	}
	a := rec.Attachments[n]
	mt := a.MediaType
	if mt == "" {
		mt = "application/octet-stream"
	}
	return a.Filename, mt, data, nil
}

// Prune removes inbound records (with their attachment bytes and settled
// turns) received before `before`, in batches, until none is left or ctx
// ends; it returns how many it removed. The retention loop calls it.
func (r *Router) Prune(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, err := r.db.PruneInbound(ctx, before, 500)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
	return total, nil
}
