package render

import (
	"fmt"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

// NoticeInput is what a notice to someone who answered an approval is about.
type NoticeInput struct {
	Channel   string // email, sms or whatsapp
	Recipient Recipient
	// Summary says what was asked ("Book BA2043 for 6 people").
	Summary string
	// Decision ("granted" or "denied"), who decided and when: for
	// approval-confirmation and already-decided.
	Decision  string
	DecidedBy string
	DecidedAt time.Time
	Reason    string
	// How to answer, repeated in not-understood: the SMS code, the email
	// token (the subject then carries "[approval:TOKEN]"), the link page.
	Code    string
	Token   string
	LinkURL string
	Now     time.Time
}

// Notice is a short message to a person who answered an approval. Subject
// and HTML are set for email only.
type Notice struct {
	Subject string
	Text    string
	HTML    string
}

// Notice renders one of the approval notices, from the templates
// <channel>/<kind>.{subject,txt,html}:
//
//   - KindApprovalConfirmation ("approval-confirmation"): your decision was
//     recorded;
//   - KindAlreadyDecided ("already-decided"): someone (DecidedBy) decided
//     first, your reply changed nothing;
//   - KindNotUnderstood ("not-understood"): we could not read a decision in
//     your reply; here is how to answer.
//
// The approvals package sends them; it also decides when (at most one
// not-understood per address per day). The email's threading headers are the
// sender's, as for any reply.
func (r *Renderer) Notice(kind string, in NoticeInput) (*Notice, error) {
	switch kind {
	case KindApprovalConfirmation, KindAlreadyDecided, KindNotUnderstood:
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownNotice, kind)
	}
	spec, err := envelope.LookupChannel(in.Channel)
	if err != nil {
		return nil, fmt.Errorf("notice: %w", err)
	}
	if !spec.Human() {
		return nil, fmt.Errorf("notice on channel %q: only channels people read (%s class)", in.Channel, spec.Class)
	}
	nv := &NoticeView{
		Summary:   oneLine(in.Summary),
		Decision:  in.Decision,
		DecidedBy: oneLine(in.DecidedBy),
		Reason:    oneLine(in.Reason),
		Code:      in.Code,
		LinkURL:   in.LinkURL,
	}
	if !in.DecidedAt.IsZero() {
		nv.DecidedAt = in.DecidedAt.In(r.cfg.TimeZone).Format("Mon 2 Jan 2006, 15:04 MST")
	}
	if in.Token != "" {
		nv.SubjectTag = "[approval:" + in.Token + "]"
	}
	v := View{Kind: kind, Channel: in.Channel, Recipient: in.Recipient, Now: in.Now, Notice: nv}
	n := &Notice{}
	if spec.Class == envelope.ClassEmail {
		s, err := r.tpl.Execute("email/"+kind+".subject", &v, r.cfg.TemplateLimits)
		if err != nil {
			return nil, fmt.Errorf("render notice subject: %w", err)
		}
		tag := ""
		if kind == KindNotUnderstood {
			tag = nv.SubjectTag
		}
		v.Subject = finalSubject(s, tag, kindPhrase(kind))
		n.Subject = v.Subject
		if n.HTML, err = r.tpl.Execute("email/"+kind+".html", &v, r.cfg.TemplateLimits); err != nil {
			return nil, fmt.Errorf("render notice html: %w", err)
		}
	}
	t, err := r.tpl.Execute(in.Channel+"/"+kind+".txt", &v, r.cfg.TemplateLimits)
	if err != nil {
		return nil, fmt.Errorf("render notice: %w", err)
	}
	n.Text = cleanText(t)
	if in.Channel == envelope.ChannelSMS {
		n.Text = smsNormalize(n.Text)
	}
	return n, nil
}
