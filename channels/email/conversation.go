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
//     configured display name; without it, the configured From;
//   - Subject is extra's ExtraSubject, made one line and bounded (the
//     rendered subject when it is empty);
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
		name := ""
		if own, err := mail.ParseAddress(s.cfg.From); err == nil {
			name = own.Name
		}
		from = (&mail.Address{Name: name, Address: a.Address}).String()
		base = a.Address
	}
	if subj := conversationSubject(extra[envelope.ExtraSubject]); subj != "" {
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
