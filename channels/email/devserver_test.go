package email

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// TestDevServerAgentInbound: in `beachd dev`, mail the person writes to
// the agent's address (agent@beachd.localhost, the dev agent's inbound
// address) — a new mail, and a reply to a conversation's signed reply
// address (agent+c-…@…) — goes through the dev SMTP server into the
// agent's mailbox, where the intake reads it; mail to anyone else lands in
// the person's mailbox.
func TestDevServerAgentInbound(t *testing.T) {
	d := startDevServer(t)
	if d.Agent.Address != "agent@"+DevDomain || d.You.Address != "you@"+DevDomain {
		t.Fatalf("dev addresses %s, %s", d.Agent.Address, d.You.Address)
	}
	db := storetest.Open(t, bolt.Options{})
	dec := &recDecider{}
	runIntake(t, devIntakeConfig(d), db, dec)

	c, err := smtpDial(d.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(to, id, subject, body string) {
		t.Helper()
		msg := fmt.Sprintf("From: You <%s>\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s>\r\nDate: %s\r\n"+
			"Content-Type: text/plain; charset=utf-8\r\n\r\n%s\r\n", d.You.Address, to, subject, id,
			time.Now().UTC().Format(time.RFC1123Z), body)
		if err := c.SendMail(d.You.Address, []string{to}, strings.NewReader(msg)); err != nil {
			t.Fatal(err)
		}
	}
	send(d.Agent.Address, "new1@beachd.localhost", "Flights to Lisbon", "Six of us, in May.")
	send("agent+c-cnv_abc.mac@"+DevDomain, "reply1@beachd.localhost", "Re: Flights to Lisbon", "Make it seven.")
	send("bob@example.org", "other1@beachd.localhost", "Not for the agent", "Hello Bob.")

	poll.Eventually(t, 10*time.Second, "both mails to the agent reach the intake", func() bool { return len(dec.inbound()) == 2 })
	got := dec.inbound()
	if got[0].MessageID != "new1@beachd.localhost" || got[0].From != d.You.Address || got[0].To != d.Agent.Address ||
		got[0].Subject != "Flights to Lisbon" || got[0].Text != "Six of us, in May." {
		t.Errorf("new mail: %+v", got[0])
	}
	if got[1].MessageID != "reply1@beachd.localhost" || got[1].To != "agent+c-cnv_abc.mac@"+DevDomain || got[1].Text != "Make it seven." {
		t.Errorf("reply: %+v", got[1])
	}
	you := openMailbox(t, d.IMAPAddr(), d.You.Address, d.You.Password)
	if n, _ := you.count("INBOX"); n != 1 {
		t.Errorf("the person's mailbox holds %d messages, want the one to bob", n)
	}
}

// TestDevServerKeepsMessages: what the dev server accepts is kept for the
// dev inbox, read as a person reads it (sender, recipients, subject,
// Reply-To, the text of a quoted-printable body), the newest DevKeep of
// them.
func TestDevServerKeepsMessages(t *testing.T) {
	d := startDevServer(t)
	c, err := smtpDial(d.SMTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := "From: beachd <agent@" + DevDomain + ">\r\nTo: " + d.You.Address + "\r\nReply-To: agent+tok123@" + DevDomain + "\r\n" +
		"Subject: =?utf-8?q?Approve=3A_Book_BA2043_=E2=80=94_=C2=A31=2C122?=\r\nContent-Type: text/plain; charset=utf-8\r\n" +
		"Content-Transfer-Encoding: quoted-printable\r\n\r\nReply YES or open this page: http://127.0.0.1:8025/a/tok=\r\n123\r\n"
	if err := c.SendMail(d.Agent.Address, []string{d.You.Address}, strings.NewReader(msg)); err != nil {
		t.Fatal(err)
	}
	ms := d.Messages()
	if len(ms) != 1 {
		t.Fatalf("kept %d messages, want 1", len(ms))
	}
	m := ms[0]
	if m.From != d.Agent.Address || len(m.To) != 1 || m.To[0] != d.You.Address || m.ReplyTo != "agent+tok123@"+DevDomain ||
		m.Subject != "Approve: Book BA2043 — £1,122" || !strings.Contains(m.Text, "http://127.0.0.1:8025/a/tok123") ||
		fmt.Sprint(m.Mailboxes) != "[you]" || m.At.IsZero() || m.MessageID == "" {
		t.Errorf("kept %+v", m)
	}
	for i := 0; i < DevKeep+5; i++ {
		if err := c.SendMail(d.You.Address, []string{d.Agent.Address}, strings.NewReader(fmt.Sprintf("Subject: n%d\r\n\r\nhello\r\n", i))); err != nil {
			t.Fatal(err)
		}
	}
	ms = d.Messages()
	if len(ms) != DevKeep || ms[len(ms)-1].Subject != fmt.Sprintf("n%d", DevKeep+4) || ms[0].Subject != "n5" || fmt.Sprint(ms[0].Mailboxes) != "[agent]" {
		t.Errorf("kept %d, first %q, last %q", len(ms), ms[0].Subject, ms[len(ms)-1].Subject)
	}
	if d.Received() != DevKeep+6 {
		t.Errorf("received %d", d.Received())
	}
}
