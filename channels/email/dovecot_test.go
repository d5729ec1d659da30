package email

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dovecotkit "github.com/cool-ai/beachd/internal/testkit/dovecot"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

// dovecot is the test kit's standalone Dovecot, with the names these tests
// use.
type dovecot struct{ *dovecotkit.Server }

const dovecotUser, dovecotPass = "agent", "dovecot-pw"

func startDovecot(t *testing.T) *dovecot {
	t.Helper()
	return &dovecot{dovecotkit.Start(t, "Dovecot IMAP integration tests", dovecotUser, dovecotPass)}
}

func (d *dovecot) addr() string           { return d.Addr() }
func (d *dovecot) start()                 { d.Start() }
func (d *dovecot) stop()                  { d.Stop() }
func (d *dovecot) doveadm(args ...string) { d.Doveadm(args...) }

func dovecotIntakeConfig(d *dovecot, mailbox string) IntakeConfig {
	return IntakeConfig{Host: "127.0.0.1", Port: d.Port, TLS: TLSNone, Username: dovecotUser, Password: dovecotPass,
		Mailbox: mailbox, Processed: "Processed", PollInterval: time.Hour, IdleRefresh: time.Minute,
		CommandTimeout: 5 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
		Parse: ParseOptions{ReplyDomain: "beachd.localhost", ReplyLocal: "agent", TrustUnauthenticated: true}}
}

// TestDovecotIdleMoveAndRestart: a reply appended while the intake IDLEs
// is handled at once (the poll interval is an hour), moved to Processed
// and marked \Seen; after Dovecot is restarted the intake reconnects and
// handles the next reply.
func TestDovecotIdleMoveAndRestart(t *testing.T) {
	d := startDovecot(t)
	db := storetest.Open(t, bolt.Options{})
	dec := &recDecider{}
	runIntake(t, dovecotIntakeConfig(d, "INBOX"), db, dec)
	poll.Eventually(t, 10*time.Second, "intake connected", func() bool {
		_, ok, _ := db.GetKV(context.Background(), "imap/INBOX")
		return ok
	})
	mta := openMailbox(t, d.addr(), dovecotUser, dovecotPass)
	mta.appendMsg("INBOX", replyMsg(1, "dove1@example.com", "Approve"))
	poll.Eventually(t, 10*time.Second, "reply handled through IDLE", func() bool { return len(dec.inbound()) == 1 })
	if in := dec.inbound()[0]; in.Text != "Approve" || in.Token != tokA {
		t.Fatalf("inbound %+v", in)
	}
	poll.Eventually(t, 5*time.Second, "moved to Processed", func() bool {
		n, seen := mta.count("Processed")
		return n == 1 && seen == 1
	})
	if n, _ := mta.count("INBOX"); n != 0 {
		t.Fatalf("INBOX still has %d", n)
	}
	mta.c.Close()

	d.stop()
	d.start()
	mta = openMailbox(t, d.addr(), dovecotUser, dovecotPass)
	mta.appendMsg("INBOX", replyMsg(2, "dove2@example.com", "Deny: too late"))
	poll.Eventually(t, 15*time.Second, "reply handled after restart", func() bool { return len(dec.inbound()) == 2 })
	if in := dec.inbound()[1]; in.Text != "Deny: too late" {
		t.Fatalf("inbound %+v", in)
	}
	poll.Eventually(t, 5*time.Second, "second moved", func() bool { n, _ := mta.count("Processed"); return n == 2 })
}

// TestDovecotUIDValidityChange: the watched mailbox is deleted and
// recreated with a new UIDVALIDITY while the intake is down; its UIDs
// restart at 1, below the stored cursor. The intake notices, rescans, and
// handles the new message.
func TestDovecotUIDValidityChange(t *testing.T) {
	d := startDovecot(t)
	db := storetest.Open(t, bolt.Options{})
	mta := openMailbox(t, d.addr(), dovecotUser, dovecotPass)
	if err := mta.c.Create("Replies", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		mta.appendMsg("Replies", replyMsg(i, fmt.Sprintf("uv%d@example.com", i), "Approve"))
	}
	dec := &recDecider{}
	stop := runIntakeStoppable(t, dovecotIntakeConfig(d, "Replies"), db, dec)
	poll.Eventually(t, 10*time.Second, "three handled", func() bool { return len(dec.inbound()) == 3 })
	poll.Eventually(t, 5*time.Second, "three moved", func() bool { n, _ := mta.count("Processed"); return n == 3 })
	// The cursor is saved after the move: wait for it before stopping, or
	// the stop can fall between the two.
	var before []byte
	poll.Eventually(t, 5*time.Second, "the cursor past the third message", func() bool {
		before, _, _ = db.GetKV(context.Background(), "imap/Replies")
		return strings.Contains(string(before), `"lastUid":3`)
	})
	stop()

	if err := mta.c.Delete("Replies").Wait(); err != nil {
		t.Fatal(err)
	}
	if err := mta.c.Create("Replies", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	d.doveadm("mailbox", "update", "-u", dovecotUser, "--uid-validity", "424242", "Replies")
	mta.appendMsg("Replies", replyMsg(4, "uv4@example.com", "Deny"))

	dec2 := &recDecider{}
	runIntake(t, dovecotIntakeConfig(d, "Replies"), db, dec2)
	poll.Eventually(t, 10*time.Second, "message after the UIDVALIDITY change handled", func() bool { return len(dec2.inbound()) == 1 })
	if in := dec2.inbound()[0]; in.MessageID != "uv4@example.com" {
		t.Fatalf("inbound %+v", in)
	}
	if !strings.Contains(string(before), `"lastUid":3`) {
		t.Fatalf("cursor before the change %s", before)
	}
	poll.Eventually(t, 5*time.Second, "cursor on the new UIDVALIDITY", func() bool {
		after, _, _ := db.GetKV(context.Background(), "imap/Replies")
		return string(after) == `{"uidValidity":424242,"lastUid":1}`
	})
}

// TestDovecotConversationMail: a new mail with two attachments, delivered
// (Delivered-To) to the agent's address and sent to the signed reply
// address of a conversation, comes through the intake into the Inbound
// handed to the decider with its recipients, attachments, full text and
// conversation.
func TestDovecotConversationMail(t *testing.T) {
	d := startDovecot(t)
	db := storetest.Open(t, bolt.Options{})
	dec := &recDecider{}
	cfg := dovecotIntakeConfig(d, "INBOX")
	cfg.ConversationKey = convKey
	runIntake(t, cfg, db, dec)
	ra, err := ReplyAddress(convKey, "travel@agents.example.org", cnvA)
	if err != nil {
		t.Fatal(err)
	}
	mta := openMailbox(t, d.addr(), dovecotUser, dovecotPass)
	mta.appendMsg("INBOX", conversationMail(ra))
	poll.Eventually(t, 10*time.Second, "mail handed to the decider", func() bool { return len(dec.inbound()) == 1 })
	in := dec.inbound()[0]
	wantRcpt := []string{ra, "bob@example.com", "carol@example.com", "travel@agents.example.org"}
	if strings.Join(in.Recipients, ",") != strings.Join(wantRcpt, ",") {
		t.Errorf("recipients %q, want %q", in.Recipients, wantRcpt)
	}
	if in.Conversation != cnvA || in.From != "alice@example.com" || in.MessageID != "m1@mail.example.com" {
		t.Errorf("conversation %q from %q id %q", in.Conversation, in.From, in.MessageID)
	}
	if !strings.Contains(in.FullText, "> the old plan") || strings.Contains(in.Text, "the old plan") {
		t.Errorf("full text %q, text %q", in.FullText, in.Text)
	}
	if len(in.Attachments) != 2 {
		t.Fatalf("attachments %+v", in.Attachments)
	}
	for i, want := range []struct{ name, mt, data string }{
		{"seat map.png", "image/png", "\x89PNG seat map"},
		{"itinerary.pdf", "application/pdf", "%PDF-1.4 itinerary"},
	} {
		a := in.Attachments[i]
		if a.Filename != want.name || a.MediaType != want.mt || string(a.Data) != want.data || a.Size != int64(len(want.data)) {
			t.Errorf("attachment %d: %q %q %q %d", i, a.Filename, a.MediaType, a.Data, a.Size)
		}
	}
	poll.Eventually(t, 5*time.Second, "moved to Processed", func() bool { n, _ := mta.count("Processed"); return n == 1 })
}

// oversizeMail is a mail with an attachment of attBytes (base64 in the
// message), CRLF line ends.
func oversizeMail(attBytes int) string {
	var b strings.Builder
	b.WriteString("From: Alice <alice@example.com>\r\nTo: travel@agents.example.org\r\nSubject: The scans, all of them\r\n" +
		"Message-ID: <big1@mail.example.com>\r\nDate: Mon, 2 Mar 2026 09:30:00 +0000\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=b1\r\n\r\n--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHere they are.\r\n" +
		"--b1\r\nContent-Type: application/pdf; name=scans.pdf\r\nContent-Disposition: attachment; filename=scans.pdf\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\n")
	line := strings.Repeat("QUJD", 19) + "\r\n" // 57 bytes of data a line
	for n := 0; n < attBytes; n += 57 {
		b.WriteString(line)
	}
	b.WriteString("--b1--\r\n")
	return b.String()
}

// TestDovecotOversizeAndUnreadableMail: a mail over MaxMessageBytes (a
// 200 KiB attachment, a 64 KiB limit) and a mail the parser refuses (a
// header line without a colon) both reach the decider as ignored, with
// what could be read of them and the reason, are recorded as processed
// and land, \Seen, in Processed; the oversize mail by its header alone.
func TestDovecotOversizeAndUnreadableMail(t *testing.T) {
	d := startDovecot(t)
	db := storetest.Open(t, bolt.Options{})
	dec := &recDecider{}
	mta := openMailbox(t, d.addr(), dovecotUser, dovecotPass)
	big := oversizeMail(200 << 10)
	mta.appendMsg("INBOX", big)
	bad := "From: Bob <bob@example.com>\r\nMessage-ID: <bad1@mail.example.com>\r\nthis line has no colon\r\nSubject: hello\r\n\r\nbody\r\n"
	mta.appendMsg("INBOX", bad)
	mta.appendMsg("INBOX", replyMsg(3, "after@example.com", "Approve"))
	cfg := dovecotIntakeConfig(d, "INBOX")
	cfg.MaxMessageBytes = 64 << 10
	runIntake(t, cfg, db, dec)

	poll.Eventually(t, 10*time.Second, "three mails handed to the decider", func() bool { return len(dec.inbound()) == 3 })
	got := dec.inbound()
	o := got[0]
	wantReason := "message of " + humanBytes(int64(len(big))) + " is over the limit of 64 KiB (email.imap.max_message_bytes)"
	if !strings.HasPrefix(o.IgnoredBecause, "message of 27") || o.IgnoredBecause != wantReason { // base64: 200 KiB is ~270 KiB
		t.Errorf("oversize reason %q, want %q", o.IgnoredBecause, wantReason)
	}
	if o.Channel != "email" || o.From != "alice@example.com" || o.Subject != "The scans, all of them" || o.MessageID != "big1@mail.example.com" ||
		o.To != "travel@agents.example.org" {
		t.Errorf("oversize header: %+v", o)
	}
	if o.Text != "" || o.FullText != "" || len(o.Attachments) != 0 {
		t.Errorf("oversize mail read past its header: text %q, %d attachments", o.Text, len(o.Attachments))
	}
	u := got[1]
	if u.Channel != "email" || u.MessageID != "bad1@mail.example.com" || u.From != "bob@example.com" || u.Subject != "hello" || !u.AuthFailed ||
		u.IgnoredBecause != "unreadable: unreadable message header: message: malformed MIME header line: this line has no colon" {
		t.Errorf("unreadable: %+v", u)
	}
	if got[2].MessageID != "after@example.com" || got[2].Text != "Approve" || got[2].IgnoredBecause != "" {
		t.Errorf("the mail behind them: %+v", got[2])
	}
	// The intake's expunge of INBOX may show a moment after the copies in
	// Processed: both are waited for.
	poll.Eventually(t, 5*time.Second, "all three in Processed, seen, and INBOX empty", func() bool {
		n, seen := mta.count("Processed")
		left, _ := mta.count("INBOX")
		return n == 3 && seen == 3 && left == 0
	})
	// Moved whole: the oversize mail is in Processed as it came.
	var whole bool
	for _, m := range mta.fetchAll("Processed") {
		whole = whole || m == big
	}
	if !whole {
		t.Error("the oversize mail is not in Processed whole")
	}
	for _, id := range []string{"big1@mail.example.com", "bad1@mail.example.com", "after@example.com"} {
		if _, ok, _ := db.GetKV(context.Background(), "imap-msgid/"+dedupKey(id, nil)); !ok {
			t.Errorf("%s not recorded as processed", id)
		}
	}
}
