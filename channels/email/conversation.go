package email

import (
	"fmt"
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// maxConversationSubject bounds the subject of a conversation answer, in
// runes (the person's own subject with "Re: "; longer is cut with "…").
const maxConversationSubject = 200

// templateRefusal is the permanent error of a delivery that asks for a
// provider template (a WhatsApp window template): email has none.
func templateRefusal(extra map[string]string) error {
	t, ok := extra[envelope.ExtraTemplate]
	if !ok || t == "" {
		return nil
	}
	return fmt.Errorf("delivery asks for the %q template, which email does not send (templates are WhatsApp's)", clip(headerText(t), 64))
}

// conversationAnswer turns a rendition into an answer in the conversation
// extra names (envelope.ExtraConversation), and returns the From to send
// it with:
//   - From is extra's ExtraFrom (the address the person wrote to) with the
//     configured display name (it must be one of ConversationFrom when
//     that is set); without it, the configured From;
//   - Subject is extra's ExtraSubject, made one line and bounded (the
//     rendered subject when it is empty), with the rendered approval tag
//     if there is one;
//   - Reply-To is the signed reply address of the conversation built on
//     ExtraFrom (or, without it, the configured Reply-To or From), when a
//     key is configured; a message that carries an approval token keeps
//     its token Reply-To, for approvals come first;
//   - Auto-Submitted is auto-replied: an answer to a person's mail
//     (RFC 3834), which their auto-responders must not answer.
//
// In-Reply-To and References come from the extra keys through the
// renderer (threadOf). Nothing from extra reaches a header unchecked.
func (s *Sender) conversationAnswer(em *render.Email, extra map[string]string) (from string, err error) {
	cnv := extra[envelope.ExtraConversation]
	from = s.cfg.From
	base := s.cfg.ReplyTo
	if base == "" {
		base = s.cfg.From
	}
	if f := strings.TrimSpace(extra[envelope.ExtraFrom]); f != "" {
		a, err := mail.ParseAddress(f)
		if err != nil || strings.ContainsFunc(a.Address, isCtl) {
			return "", fmt.Errorf("conversation from %q: not an address", clip(headerText(f), 100))
		}
		if !s.mayAnswerFrom(a.Address) {
			return "", fmt.Errorf("conversation from %q: not one of the addresses answers may go out from", clip(a.Address, 100))
		}
		name := ""
		if own, err := mail.ParseAddress(s.cfg.From); err == nil {
			name = own.Name
		}
		from = (&mail.Address{Name: name, Address: a.Address}).String()
		base = a.Address
	}
	if subj := conversationSubject(extra[envelope.ExtraSubject]); subj != "" {
		// An approval's subject tag stays: some clients keep nothing else.
		if tag := subjectTokenRe.FindString(em.Subject); tag != "" && !strings.Contains(subj, tag) {
			subj += " " + tag
		}
		em.Subject = subj
	}
	if em.Headers == nil {
		em.Headers = map[string]string{}
	}
	em.Headers["Auto-Submitted"] = "auto-replied"
	if msgIDToken(strings.Trim(em.MessageID, "<>"), ParseOptions{}) != "" {
		return from, nil // the approval's Reply-To stays
	}
	if len(s.cfg.ConversationKey) > 0 {
		ra, err := ReplyAddress(s.cfg.ConversationKey, base, cnv)
		if err != nil {
			s.log.Warn("conversation answer without its signed reply address", "conversation", clip(headerText(cnv), 64), "error", err)
			return from, nil
		}
		em.Headers["Reply-To"] = ra
	}
	return from, nil
}

// mayAnswerFrom: addr is one of SenderConfig.ConversationFrom, or that
// list is empty.
func (s *Sender) mayAnswerFrom(addr string) bool {
	if len(s.cfg.ConversationFrom) == 0 {
		return true
	}
	for _, a := range s.cfg.ConversationFrom {
		if strings.EqualFold(strings.TrimSpace(a), addr) {
			return true
		}
	}
	return false
}

// conversationSubject makes s one header line: controls and line breaks
// become spaces, runs of spaces one, at most maxConversationSubject runes.
func conversationSubject(s string) string {
	s = strings.ToValidUTF8(headerText(s), "")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) && r != '\u200d'
	}), " ")
	if utf8.RuneCountInString(s) > maxConversationSubject {
		s = strings.TrimSpace(string([]rune(s)[:maxConversationSubject-1])) + "…"
	}
	return s
}

// clip bounds s to n bytes for an error text.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return capText(s, n) + "…"
}
