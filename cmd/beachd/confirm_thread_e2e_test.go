package main

import (
	"fmt"
	"mime"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// The "Approved" confirmation mail is threaded under the request: its
// In-Reply-To and References carry the request's Message-ID (real SMTP in,
// real IMAP intake, the dev mailbox).
func TestConfirmationMailIsThreaded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with its mail server")
	}
	d := startDev(t)
	d.requestApproval("appr_thread", `[{"channel":"email","address":"you@beachd.localhost"}]`)
	var req *mail.Message
	poll.Eventually(t, 20*time.Second, "the approval mail", func() bool {
		if ms := d.inbox("BA2043"); len(ms) > 0 {
			req = ms[0]
		}
		return req != nil
	})
	subject, _ := new(mime.WordDecoder).DecodeHeader(req.Header.Get("Subject"))
	msgID := req.Header.Get("Message-Id")
	rt, err := mail.ParseAddress(req.Header.Get("Reply-To"))
	if err != nil || msgID == "" {
		t.Fatalf("request Reply-To %q, Message-ID %q", req.Header.Get("Reply-To"), msgID)
	}
	d.sendMail("you@beachd.localhost", rt.Address, fmt.Sprintf("From: You <you@beachd.localhost>\nTo: %s\nSubject: Re: %s\nMessage-ID: <reply-thread@beachd.localhost>\nIn-Reply-To: %s\nReferences: %s\nContent-Type: text/plain; charset=utf-8\n\nyes\n", rt.Address, subject, msgID, msgID))
	var conf *mail.Message
	poll.Eventually(t, 30*time.Second, "the confirmation mail", func() bool {
		if ms := d.inbox("Approved"); len(ms) > 0 {
			conf = ms[0]
		}
		return conf != nil
	})
	if irt := conf.Header.Get("In-Reply-To"); irt != msgID {
		t.Errorf("confirmation In-Reply-To %q, want the request's %q", irt, msgID)
	}
	if refs := conf.Header.Get("References"); !strings.Contains(refs, msgID) {
		t.Errorf("confirmation References %q lack the request's %q", refs, msgID)
	}
}
