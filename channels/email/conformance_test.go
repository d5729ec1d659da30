package email

import (
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/channeltest"
	"github.com/cool-ai/beachd/channels/email/smtptest"
)

// smtpPeer is the fake SMTP server as a conformance peer: Message-IDs are
// its keys.
type smtpPeer struct {
	be   *smtptest.Server
	mu   sync.Mutex
	hang chan struct{}
}

func (p *smtpPeer) Fail(f channeltest.Failure) {
	p.be.Set(func(s *smtptest.Server) {
		switch f {
		case channeltest.Permanent:
			s.DataErr = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "rejected"}
		case channeltest.Temporary:
			s.MailErr = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}
		case channeltest.Hang:
			p.mu.Lock()
			p.hang = make(chan struct{})
			s.Hang = p.hang
			p.mu.Unlock()
		}
	})
}

func (p *smtpPeer) Heal() {
	p.be.Set(func(s *smtptest.Server) {
		s.DataErr, s.MailErr, s.Hang = nil, nil, nil
	})
	p.mu.Lock()
	if p.hang != nil {
		close(p.hang)
		p.hang = nil
	}
	p.mu.Unlock()
}

func (p *smtpPeer) Keys() []string {
	var out []string
	for _, m := range p.be.Messages() {
		out = append(out, m.MessageID)
	}
	return out
}

func TestSenderConformance(t *testing.T) {
	channeltest.Run(t, channeltest.Subject{Channel: "email", To: "carol@example.com",
		New: func(t *testing.T) (channels.Deliverer, channeltest.Peer) {
			be := &smtptest.Server{Keep: true}
			port, _ := smtptest.Start(t, be, TLSNone)
			p := &smtpPeer{be: be}
			t.Cleanup(p.Heal)
			return newTestSender(t, port, func(c *SenderConfig) { c.Timeout = 10 * time.Second }, true), p
		}})
}
