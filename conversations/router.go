package conversations

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Bounds of an inbound message, beside the store's (store.MaxInbound*).
const (
	maxSubject    = 998
	maxRecipients = 100
	maxAddress    = 320
)

// route is where an inbound message goes.
type route struct {
	conv *store.Conversation // an existing conversation (thread match)
	// agent and our address, for a new conversation or the thread's.
	agent, our string
	how        string // "verified", "in-reply-to", "thread", "address"
	threadKey  string // SMS/WhatsApp
}

func (rt route) found() bool { return rt.agent != "" }

// HandleInbound decides what an inbound message is and records it, with
// its disposition (and the turn it queues), durably before it returns: a
// channel acknowledges the message (IMAP marks it processed, Twilio gets
// its 200) only after a nil error. The error is for failures of beachd
// itself; every property of the message is an outcome.
//
// The message is offered to approvals first. Approvals' outcome stands
// (disposition "approval") except:
//   - "no-token": not an approval answer; it goes on to conversations;
//   - "not-understood" and "unknown-token" of an SMS or WhatsApp text go on
//     when the message belongs to an open conversation or was sent to an
//     agent's number: a person texting an agent writes digits and words
//     that approvals tries as a code first. Not a text that carried the
//     right code of a request waiting for the sender (not-understood with
//     an approval): it is about that request, and approvals answered it;
//   - "wrong-code" (a text that reads as an answer, "YES 111111", from a
//     number with requests waiting, whose code matches none) and
//     "rate-limited" stay: approvals told the person about their requests,
//     and the text is never also a chat turn;
//   - "ignored" (auto-reply, bounce, a channel's own reason): disposition
//     ignored, nothing more;
//   - "duplicate" for a message this router has no record of: approvals
//     saw it, but beachd stopped before recording it here. It goes on when
//     it cannot have been an approval answer — an email without a token, an
//     SMS/WhatsApp text that is not a button nor an opt-out and belongs to a
//     conversation or agent number. (An SMS that carried a valid code and
//     crashed in that window would start a turn as well; the window is one
//     transaction wide.)
//
// Then, in order: automatic mail (auto-replies, bounces) and mail from our
// own addresses are ignored; the thread (a verified conversation id, an
// In-Reply-To/References naming a message of a conversation, or the open
// SMS/WhatsApp conversation of this number pair) or else an agent's inbound
// address among the recipients gives the conversation; nothing: unrouted.
// The sender must pass email authentication and the agent's allow list,
// and must be a participant to continue a thread; else rejected (with at
// most one refusal a day when the agent refuses unknown senders). Beyond
// the conversation's turn limits the message is held. A repeated provider
// message id is a duplicate and starts nothing.
func (r *Router) HandleInbound(ctx context.Context, in envelope.Inbound) (envelope.InboundResult, error) {
	in = r.boundInbound(in)
	if in.MessageID != "" {
		rec, err := r.db.InboundByMessageID(ctx, in.Channel, in.MessageID)
		switch {
		case err == nil:
			r.cfg.Metrics.observeInbound(in.Channel, envelope.DispositionDuplicate)
			return envelope.InboundResult{Outcome: envelope.DispositionDuplicate, Conversation: rec.ConversationID, ApprovalID: rec.ApprovalID}, nil
		case !errors.Is(err, store.ErrNotFound):
			return envelope.InboundResult{}, err
		}
	}
	var ares envelope.InboundResult
	if r.dec != nil {
		var err error
		if ares, err = r.dec.HandleInbound(ctx, in); err != nil {
			return envelope.InboundResult{}, err
		}
	}
	rt, err := r.route(ctx, in)
	if err != nil {
		return envelope.InboundResult{}, err
	}
	rec := r.newRecord(in)
	switch ares.Outcome {
	case "", approvals.OutcomeNoToken:
	case approvals.OutcomeNotUnderstood, approvals.OutcomeUnknownToken:
		if !textChannel(in.Channel) || !rt.found() || ares.ApprovalID != "" {
			return r.recordApproval(ctx, in, rec, ares)
		}
	case approvals.OutcomeDuplicate:
		if !duplicateMayGoOn(in) || !rt.found() {
			return r.recordApproval(ctx, in, rec, ares)
		}
	case approvals.OutcomeIgnored:
		rec.Disposition, rec.Reason = envelope.DispositionIgnored, cmp.Or(in.IgnoredBecause, "approvals ignored it (automatic mail, bounce or the channel's reason)")
		return r.finish(ctx, in, store.InboundWrite{Record: *rec}, rt, false)
	default:
		return r.recordApproval(ctx, in, rec, ares)
	}

	w := store.InboundWrite{Record: *rec}
	set := func(disp, reason string) { w.Record.Disposition, w.Record.Reason = disp, reason }
	refuse := false
	switch {
	case in.IgnoredBecause != "":
		set(envelope.DispositionIgnored, in.IgnoredBecause)
	case in.AutoGenerated:
		set(envelope.DispositionIgnored, "automatic mail (auto-reply)")
	case in.Bounce:
		set(envelope.DispositionIgnored, "bounce")
	case in.TokenConflict:
		set(envelope.DispositionIgnored, "two different approval tokens in one message")
	case r.ours(in.Channel, in.From):
		set(envelope.DispositionIgnored, "sent from one of our own addresses")
	case !rt.found():
		set(envelope.DispositionUnrouted, "no conversation and no agent inbound address matches")
	default:
		w.Record.Agent = rt.agent
		ac := r.cfg.Agents[rt.agent]
		switch {
		case in.AuthFailed:
			set(envelope.DispositionRejected, "sender not authenticated: "+clip(in.AuthDetail, 200))
		case rt.conv != nil && !slices.Contains(rt.conv.Participants, in.From):
			set(envelope.DispositionRejected, "not a participant of conversation "+rt.conv.ID)
		case !allowed(in.Channel, in.From, ac.Allow):
			set(envelope.DispositionRejected, "sender not on agent "+rt.agent+"'s allow list")
			refuse = ac.RefuseUnknown
		default:
			set(envelope.DispositionTurn, "")
			if rt.conv != nil {
				w.Conversation = &store.Conversation{ID: rt.conv.ID}
			} else {
				w.New = true
				w.Conversation = &store.Conversation{ID: r.db.NewID("cnv_"), Agent: rt.agent, Channel: in.Channel,
					OurAddress: rt.our, Subject: in.Subject}
			}
			w.Record.To = rt.our
			w.ThreadKey, w.IdleTimeout = rt.threadKey, ac.IdleTimeout
			w.PerMinute, w.PerHour = ac.PerMinute, ac.PerHour
			w.Limits = r.turnLimits(rt.agent, in.From)
			w.ReleaseHeld = inboundOf(in.Channel).Window > 0
			for _, id := range in.References {
				if id = bareID(id); id != "" {
					w.References = append(w.References, id)
				}
			}
			w.Turn = &store.Turn{ID: r.db.NewID("trn_"), Agent: rt.agent, MessageID: a2aMessageID(in.Channel, in.MessageID, rec.ID)}
			w.Data = attachmentData(in.Attachments, w.Record.Attachments)
		}
	}
	return r.finish(ctx, in, w, rt, refuse)
}

// turnLimits are the flood limits across conversations a turn of agent
// from sender counts against: the sender's, then the agent's.
func (r *Router) turnLimits(agent, from string) []store.TurnLimit {
	l := r.cfg.TurnLimits[agent]
	return []store.TurnLimit{
		{Key: store.SenderLimitKey(agent, from), PerMinute: l.SenderPerMinute, PerHour: l.SenderPerHour, Name: limitSender},
		{Key: store.AgentLimitKey(agent), PerMinute: l.AgentPerMinute, PerHour: l.AgentPerHour, Name: limitAgent},
	}
}

// heldBy names the limit a held record's reason gives: sender, agent or
// conversation.
func heldBy(reason string) string {
	switch {
	case strings.HasPrefix(reason, limitSender+":"):
		return "sender"
	case strings.HasPrefix(reason, limitAgent+":"):
		return "agent"
	}
	return "conversation"
}

// ReleaseInbound lets a held message start its turn now (an operator's
// decision: no flood limit applies to it). The record becomes a turn, its
// reason keeps why it was held. ErrNotFound: no such message; ErrNotHeld:
// it is not held.
func (r *Router) ReleaseInbound(ctx context.Context, id string) (*store.InboundRecord, error) {
	rec, err := r.db.InboundRecord(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("inbound %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if rec.Disposition != envelope.DispositionHeld {
		return nil, fmt.Errorf("inbound %s is %s: %w", id, rec.Disposition, ErrNotHeld)
	}
	out, err := r.db.ReleaseInbound(ctx, id, store.Turn{ID: r.db.NewID("trn_"), Agent: rec.Agent,
		MessageID: a2aMessageID(rec.Channel, rec.MessageID, rec.ID)}, r.cfg.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("inbound %q: %w", id, ErrNotFound)
	case errors.Is(err, store.ErrBadState):
		return nil, fmt.Errorf("inbound %s: %w", id, ErrNotHeld)
	case err != nil:
		return nil, err
	}
	r.log.Info("held conversation message released", "inbound_id", id, "conversation_id", out.Record.ConversationID,
		"turn_id", out.Turn.ID, "agent", rec.Agent)
	r.Wake()
	return out.Record, nil
}

// finish writes the record and does what follows it.
func (r *Router) finish(ctx context.Context, in envelope.Inbound, w store.InboundWrite, rt route, refuse bool) (envelope.InboundResult, error) {
	out, err := r.db.RecordInbound(ctx, w)
	if errors.Is(err, store.ErrDuplicateMessage) {
		r.cfg.Metrics.observeInbound(in.Channel, envelope.DispositionDuplicate)
		return envelope.InboundResult{Outcome: envelope.DispositionDuplicate, Conversation: out.Record.ConversationID}, nil
	}
	if err != nil {
		return envelope.InboundResult{}, err
	}
	rec := out.Record
	r.cfg.Metrics.observeInbound(in.Channel, rec.Disposition)
	attrs := []any{"inbound_id", rec.ID, "channel", rec.Channel, "disposition", rec.Disposition, "agent", rec.Agent,
		"conversation_id", rec.ConversationID, "reason", rec.Reason}
	switch rec.Disposition {
	case envelope.DispositionHeld:
		limit := heldBy(rec.Reason)
		r.cfg.Metrics.observeHeld(in.Channel, limit)
		r.log.Warn("conversation message held: turn limit reached", append(attrs, "limit", limit)...)
	case envelope.DispositionRejected:
		r.log.Warn("conversation message rejected", attrs...)
	default:
		r.log.Info("conversation inbound", attrs...)
	}
	if out.Turn != nil {
		r.Wake()
	}
	if out.Released > 0 {
		r.log.Info("held answers released: the person wrote again", "conversation_id", rec.ConversationID, "count", out.Released)
		r.notify()
	}
	if refuse {
		r.refuse(ctx, in, rt)
	}
	return envelope.InboundResult{Outcome: rec.Disposition, Conversation: rec.ConversationID}, nil
}

// recordApproval records a message approvals answered, and returns
// approvals' result.
func (r *Router) recordApproval(ctx context.Context, in envelope.Inbound, rec *store.InboundRecord, ares envelope.InboundResult) (envelope.InboundResult, error) {
	rec.Disposition, rec.Reason, rec.ApprovalID = envelope.DispositionApproval, ares.Outcome, ares.ApprovalID
	if _, err := r.db.RecordInbound(ctx, store.InboundWrite{Record: *rec}); err != nil && !errors.Is(err, store.ErrDuplicateMessage) {
		return envelope.InboundResult{}, err
	}
	r.cfg.Metrics.observeInbound(in.Channel, envelope.DispositionApproval)
	return ares, nil
}

// classOf is the transport class of channel ("" for a name that is not a
// channel).
func classOf(channel string) envelope.Class {
	spec, _ := envelope.Channel(channel)
	return spec.Class
}

// inboundOf is the inbound behaviour of channel (none for a name that is
// not a channel).
func inboundOf(channel string) envelope.InboundSpec {
	spec, _ := envelope.Channel(channel)
	return spec.Inbound
}

func textChannel(ch string) bool { return classOf(ch) == envelope.ClassMessaging }

// duplicateMayGoOn: a message approvals had already seen cannot have been
// an approval answer (see HandleInbound).
func duplicateMayGoOn(in envelope.Inbound) bool {
	switch classOf(in.Channel) {
	case envelope.ClassEmail:
		return in.Token == "" && !in.TokenConflict && in.Decision == ""
	case envelope.ClassMessaging:
		return in.ButtonPayload == "" && !approvals.IsOptOut(in.Text)
	case envelope.ClassChat:
		return in.ButtonPayload == ""
	}
	return false
}

// ours reports whether from is one of our own addresses: a sending address
// or any agent's inbound address or number.
func (r *Router) ours(channel, from string) bool {
	if spec, _ := envelope.Channel(channel); spec.Address == envelope.AddressEmail && r.own[from] {
		return true
	}
	_, ok := r.byAddress[channel][from]
	return ok
}

// route finds the conversation or agent of a message.
func (r *Router) route(ctx context.Context, in envelope.Inbound) (route, error) {
	now := r.cfg.Now()
	switch classOf(in.Channel) {
	case envelope.ClassEmail:
		if in.Conversation != "" {
			c, err := r.db.Conversation(ctx, in.Conversation)
			switch {
			case err == nil:
				if rt, ok := r.threadRoute(c, "verified"); ok {
					return rt, nil
				}
			case !errors.Is(err, store.ErrNotFound):
				return route{}, err
			}
		}
		ids := []string{in.InReplyTo}
		for i := len(in.References) - 1; i >= 0; i-- {
			ids = append(ids, in.References[i])
		}
		for _, id := range ids {
			c, err := r.conversationOfMessageID(ctx, id)
			if err != nil {
				return route{}, err
			}
			if c != nil {
				if rt, ok := r.threadRoute(c, "in-reply-to"); ok {
					return rt, nil
				}
			}
		}
	case envelope.ClassMessaging:
		for _, our := range r.recipients(in) {
			name, ok := r.byAddress[in.Channel][our]
			if !ok {
				continue
			}
			key := store.ThreadKey(in.Channel, our, in.From)
			c, err := r.db.ConversationByThread(ctx, key)
			switch {
			case err == nil:
				if now.Before(c.UpdatedAt.Add(r.cfg.Agents[c.Agent].IdleTimeout)) {
					if rt, ok := r.threadRoute(c, "thread"); ok {
						rt.threadKey = key
						return rt, nil
					}
				}
			case !errors.Is(err, store.ErrNotFound):
				return route{}, err
			}
			return route{agent: name, our: our, how: "address", threadKey: key}, nil
		}
		return route{}, nil
	case envelope.ClassChat:
		return r.slackRoute(ctx, in)
	}
	for _, a := range r.recipients(in) {
		if name, ok := r.byAddress[in.Channel][a]; ok {
			return route{agent: name, our: a, how: "address"}, nil
		}
	}
	return route{}, nil
}

// Entries of AgentConfig.Slack besides a channel id.
const (
	// SlackIM takes direct messages to the Slack app.
	SlackIM = "im"
	// SlackAnyChannel takes mentions of the app in a channel no agent
	// lists by its id.
	SlackAnyChannel = "*"
)

// SlackThread is the To of a Slack message: the thread it is in (the
// conversation id, "/", the thread's ts), which is the conversation's
// thread and where its answers are posted.
func SlackThread(channel, threadTS string) string { return channel + "/" + threadTS }

// slackRoute finds the conversation of a Slack message by its thread (To,
// see SlackThread), or else the agent that takes messages where it was
// written: its Recipients are SlackIM for a direct message, the channel
// id for a mention. A thread, being explicit, stays the conversation's
// however long it was quiet (as a mail thread does).
func (r *Router) slackRoute(ctx context.Context, in envelope.Inbound) (route, error) {
	ch, ts, ok := strings.Cut(in.To, "/")
	if !ok || ch == "" || ts == "" {
		return route{}, nil
	}
	key := store.ThreadKey(in.Channel, ch, ts)
	c, err := r.db.ConversationByThread(ctx, key)
	switch {
	case err == nil:
		if rt, ok := r.threadRoute(c, "thread"); ok {
			rt.threadKey = key
			return rt, nil
		}
	case !errors.Is(err, store.ErrNotFound):
		return route{}, err
	}
	for _, where := range in.Recipients {
		name, ok := r.byAddress[in.Channel][where]
		if !ok && where != SlackIM {
			name, ok = r.byAddress[in.Channel][SlackAnyChannel]
		}
		if ok {
			return route{agent: name, our: in.To, how: "address", threadKey: key}, nil
		}
	}
	return route{}, nil
}

func (r *Router) threadRoute(c *store.Conversation, how string) (route, bool) {
	if _, ok := r.cfg.Agents[c.Agent]; !ok {
		return route{}, false
	}
	return route{conv: c, agent: c.Agent, our: c.OurAddress, how: how}, true
}

// recipients are the message's To and Recipients, normalised, without
// repeats.
func (r *Router) recipients(in envelope.Inbound) []string {
	var out []string
	for _, a := range append([]string{in.To}, in.Recipients...) {
		if a = normalise(in.Channel, a); a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// conversationOfMessageID: one of our Message-IDs names a delivery whose
// Extra carries the conversation; any other id may be a message received
// in a conversation.
func (r *Router) conversationOfMessageID(ctx context.Context, id string) (*store.Conversation, error) {
	id = bareID(id)
	if id == "" {
		return nil, nil
	}
	if did, ok := ourDeliveryID(id); ok {
		d, err := r.db.Delivery(ctx, did)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, nil
		case err != nil:
			return nil, err
		}
		cnv := d.Extra[envelope.ExtraConversation]
		if cnv == "" {
			return nil, nil
		}
		c, err := r.db.Conversation(ctx, cnv)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		return c, err
	}
	c, err := r.db.ConversationByMessageID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return c, err
}

// boundInbound normalises the message and applies the bounds.
func (r *Router) boundInbound(in envelope.Inbound) envelope.Inbound {
	in.Channel = strings.ToLower(strings.TrimSpace(in.Channel))
	in.From = normalise(in.Channel, in.From)
	in.To = normalise(in.Channel, in.To)
	in.MessageID = clip(strings.TrimSpace(in.MessageID), 998)
	in.Subject = clip(in.Subject, maxSubject)
	in.Text = clip(in.Text, store.MaxInboundText)
	in.FullText = clip(in.FullText, store.MaxInboundText)
	in.InReplyTo = clip(in.InReplyTo, 998)
	if len(in.References) > store.MaxMessageIDChain {
		in.References = in.References[len(in.References)-store.MaxMessageIDChain:]
	}
	if len(in.Recipients) > maxRecipients {
		in.Recipients = in.Recipients[:maxRecipients]
	}
	if len(in.Attachments) > store.MaxInboundAttachments {
		in.Attachments = in.Attachments[:store.MaxInboundAttachments]
	}
	if in.ReceivedAt.IsZero() {
		in.ReceivedAt = r.cfg.Now()
	}
	return in
}

func (r *Router) newRecord(in envelope.Inbound) *store.InboundRecord {
	rec := &store.InboundRecord{ID: r.db.NewID("inb_"), Channel: in.Channel, From: in.From, To: in.To, MessageID: in.MessageID,
		Subject: in.Subject, Text: in.Text, ReceivedAt: r.cfg.Now()}
	if in.FullText != in.Text {
		rec.FullText = in.FullText
	}
	var total int64
	for _, a := range in.Attachments {
		info := store.AttachmentInfo{Filename: clip(a.Filename, 255), MediaType: clip(a.MediaType, 255), Size: a.Size, URL: clip(a.URL, 2048)}
		if n := int64(len(a.Data)); n > 0 {
			info.Size = n
			if total+n > store.MaxInboundAttachmentBytes {
				info.Note = "not kept: over the 25 MiB bound of one message's attachments"
			} else {
				total += n
			}
		}
		rec.Attachments = append(rec.Attachments, info)
	}
	return rec
}

// attachmentData are the bytes to store for infos (nil where none).
func attachmentData(atts []envelope.InboundAttachment, infos []store.AttachmentInfo) [][]byte {
	var out [][]byte
	for i, a := range atts {
		if i >= len(infos) {
			break
		}
		if len(a.Data) > 0 && infos[i].Note == "" {
			out = append(out, a.Data)
		} else {
			out = append(out, nil)
		}
	}
	return out
}

// a2aMessageID is the A2A messageId of a turn: derived from the provider's
// message id, so that a message delivered twice can only be one turn
// (also for the agent, which may recognise a repeated messageId).
func a2aMessageID(channel, providerID, inboundID string) string {
	src := channel + "\x00" + providerID
	if providerID == "" {
		src = "inbound\x00" + inboundID
	}
	sum := sha256.Sum256([]byte(src))
	return "beachd-in-" + hex.EncodeToString(sum[:])[:32]
}

// refuse sends a sender who may not write to the agent one polite refusal
// a day (never to automatic mail, which is ignored before this).
func (r *Router) refuse(ctx context.Context, in envelope.Inbound, rt route) {
	now := r.cfg.Now()
	first, err := r.db.Once(ctx, "conversation-refusal/"+in.Channel+"/"+in.From+"/"+now.UTC().Format("2006-01-02"), now)
	if err != nil || !first {
		return
	}
	text := "Sorry, this address only takes messages from people it knows, so your message was not passed on."
	env := &envelope.Envelope{Role: "agent",
		Parts: []envelope.Part{{Text: &text, Metadata: map[string]any{"partType": envelope.PartResponse}}},
		Meta:  envelope.Meta{SessionID: "beachd-conversations", TurnID: "refusal-" + r.db.NewID(""), ProducedAt: now.UTC(), FinalizedBy: "complete"}}
	body, err := json.Marshal(env)
	if err != nil {
		return
	}
	extra := map[string]string{envelope.ExtraFrom: rt.our}
	if classOf(in.Channel) == envelope.ClassEmail {
		if id := bareID(in.MessageID); id != "" {
			extra[envelope.ExtraInReplyTo] = id
			extra[envelope.ExtraReferences] = "<" + id + ">"
		}
		if s := replySubject(in.Subject); s != "" {
			extra[envelope.ExtraSubject] = s
		}
	}
	to := in.From
	if classOf(in.Channel) == envelope.ClassChat {
		// Into the thread the message was written in, where the person
		// looks for an answer (a direct message's, or a channel's).
		if ch, ts, ok := strings.Cut(in.To, "/"); ok && ch != "" && ts != "" {
			to, extra[envelope.ExtraThreadTS] = ch, ts
		}
	}
	if _, err := r.db.Ingest(ctx, store.Ingest{Envelope: body, Agent: rt.agent, Source: "conversation-refusal",
		Deliveries: []store.NewDelivery{{Channel: in.Channel, To: to, Extra: extra}}}); err != nil {
		r.log.Error("enqueue conversation refusal", "channel", in.Channel, "err", err)
		return
	}
	r.log.Info("conversation refusal sent", "channel", in.Channel, "agent", rt.agent)
	r.notify()
}

func (r *Router) notify() {
	if r.send != nil {
		r.send.Notify()
	}
}

// Wake makes Run look for due turns now. It never blocks.
func (r *Router) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
