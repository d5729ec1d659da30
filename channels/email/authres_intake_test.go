package email

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/conversations"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

type nopEnqueuer struct{}

func (nopEnqueuer) Enqueue(context.Context, *envelope.Envelope, []envelope.Recipient, string, string) (string, error) {
	return "env_nop", nil
}

// pendingApproval stores an approval asked of alice@example.org by email,
// as the API would, and returns its id and her email token.
func pendingApproval(t *testing.T, db *bolt.DB, svc *approvals.Service, id string) string {
	t.Helper()
	ctx := context.Background()
	raw, err := os.ReadFile("../../testdata/dev-approval.json")
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Envelope envelope.Envelope `json:"envelope"`
	}
	if err := json.Unmarshal([]byte(strings.Replace(string(raw), "appr_dev_1", id, 1)), &req); err != nil {
		t.Fatal(err)
	}
	env := &req.Envelope
	to := []envelope.Recipient{{Channel: envelope.ChannelEmail, Address: "alice@example.org"}}
	as, per, err := svc.Prepare(ctx, env, to, "travel")
	if err != nil {
		t.Fatal(err)
	}
	envRaw, _ := json.Marshal(env)
	res, err := db.Ingest(ctx, store.Ingest{Envelope: envRaw, Agent: "travel", Approvals: as,
		Deliveries: []store.NewDelivery{{Channel: envelope.ChannelEmail, To: "alice@example.org", ApprovalIDs: per[0]}}})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := svc.Handles(ctx, res.Deliveries[0], nil)
	if err != nil || len(hs) != 1 || hs[0].Token == "" {
		t.Fatalf("handles %+v %v", hs, err)
	}
	return hs[0].Token
}

// authReply is an answer from "Alice" as it lands in the mailbox: the
// receiving server's trace and results on top (top), then what the sender
// wrote, with from as its From field.
func authReply(n int, token, top, sent, from string) string {
	return top + sent + fmt.Sprintf("From: %s\r\nTo: approvals+%s@reply.beachd.test\r\n"+
		"Subject: Re: Approval needed [approval:%s]\r\nMessage-ID: <auth-e2e-%d@example.org>\r\n"+
		"Date: Mon, 2 Mar 2026 09:30:00 +0000\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nApprove\r\n", from, token, token, n)
}

const aliceFrom = "Alice <alice@example.org>"

// TestIntakeSenderVerification: replies delivered into a real IMAP mailbox
// (go-imap's server and Dovecot) reach a real approvals service through the
// intake. Spoofed replies with the right token — one with no
// Authentication-Results, one whose sender forged a passing field of the
// trusted authserv-id below the receiving server's failing one, one with
// dmarc=none and spf=fail, and those whose From is not one clean mailbox
// or whose DMARC pass names no domain, each with results that would pass
// for the From beachd used to read — are quarantined with the reason and
// decide nothing; the genuine reply then decides.
func TestIntakeSenderVerification(t *testing.T) {
	type peer struct {
		name string
		open func(t *testing.T) (cfg IntakeConfig, mta *mailbox)
	}
	for _, p := range []peer{
		{"go-imap", func(t *testing.T) (IntakeConfig, *mailbox) {
			d := startDevServer(t)
			return devIntakeConfig(d), openMailbox(t, d.IMAPAddr(), d.Agent.Address, d.Agent.Password)
		}},
		{"dovecot", func(t *testing.T) (IntakeConfig, *mailbox) {
			d := startDovecot(t)
			return dovecotIntakeConfig(d, "INBOX"), openMailbox(t, d.addr(), dovecotUser, dovecotPass)
		}},
	} {
		t.Run(p.name, func(t *testing.T) {
			ctx := context.Background()
			cfg, mta := p.open(t)
			cfg.Parse = ParseOptions{ReplyDomain: "reply.beachd.test", ReplyLocal: "approvals", AuthServID: "mx.example.com"}
			db := storetest.Open(t, bolt.Options{})
			svc, err := approvals.New(approvals.Config{Secret: []byte(strings.Repeat("s", 32)), PublicURL: "https://beachd.example.org"},
				db, nopEnqueuer{}, nil, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			id := "appr_auth_" + strings.ReplaceAll(p.name, "-", "")
			token := pendingApproval(t, db, svc, id)
			runIntake(t, cfg, db, svc)
			poll.Eventually(t, 10*time.Second, "intake connected", func() bool {
				_, ok, _ := db.GetKV(ctx, "imap/INBOX")
				return ok
			})

			received := "Received: from relay.attacker.example (relay.attacker.example [203.0.113.9])\r\n" +
				"\tby mx.example.com (Postfix) with ESMTPS id 4TDz14; Mon, 2 Mar 2026 09:30:01 +0000\r\n"
			passing := received + "Authentication-Results: mx.example.com; dkim=pass header.d=example.org; dmarc=pass header.from=example.org\r\n"
			spoofs := []struct{ top, sent, reason, from string }{
				{received, "", "no Authentication-Results from mx.example.com", aliceFrom},
				{received + "Authentication-Results: mx.example.com; dkim=fail (body hash did not verify) header.d=example.org; dmarc=none header.from=example.org\r\n",
					"Received: from pc by relay.attacker.example; Mon, 2 Mar 2026 09:30:00 +0000\r\n" +
						"Authentication-Results: mx.example.com; dkim=pass header.d=example.org; dmarc=pass header.from=example.org\r\n",
					"dkim=fail (example.org)", aliceFrom},
				{received + "Authentication-Results: mx.example.com; dkim=none; spf=fail smtp.mailfrom=example.org; dmarc=none header.from=example.org\r\n",
					"", "spf=fail", aliceFrom},
				// The server judged the mailbox it read (evil.example, which
				// passes DMARC); beachd's old lenient reading took alice's.
				{received + "Authentication-Results: mx.example.com; dkim=pass header.d=evil.example; spf=pass smtp.mailfrom=evil.example; dmarc=pass\r\n",
					"", "From is not one RFC 5322 mailbox", "mallory@evil.example <alice@example.org"},
				{received + "Authentication-Results: mx.example.com; dkim=pass header.d=evil.example; dmarc=pass\r\n",
					"", "dmarc=pass names no header.from", aliceFrom},
				{passing, "", "From is a group", "Friends: alice@example.org;"},
				{passing, "", "2 From fields", "Mallory <mallory@evil.example>\r\nFrom: " + aliceFrom},
			}
			for i, s := range spoofs {
				mta.appendMsg("INBOX", authReply(i, token, s.top, s.sent, s.from))
			}
			poll.Eventually(t, 15*time.Second, "spoofed replies handled", func() bool { n, _ := mta.count("Processed"); return n == len(spoofs) })
			v, err := svc.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if v.State != "pending" {
				t.Fatalf("a spoofed reply decided: state %q by %q", v.State, v.DecidedBy)
			}
			var quarantined []string
			for _, a := range v.Audit {
				if a.Event == approvals.OutcomeQuarantined {
					quarantined = append(quarantined, a.Detail)
				}
			}
			if len(quarantined) != len(spoofs) {
				t.Fatalf("quarantined %d of %d spoofs: %+v", len(quarantined), len(spoofs), v.Audit)
			}
			for i, s := range spoofs {
				if !strings.Contains(quarantined[i], s.reason) {
					t.Errorf("spoof %d recorded as %q, want the reason %q", i, quarantined[i], s.reason)
				}
			}

			mta.appendMsg("INBOX", authReply(99, token, received+
				"Authentication-Results: mx.example.com; dkim=pass header.d=example.org; spf=pass smtp.mailfrom=example.org; dmarc=pass (p=REJECT) header.from=example.org\r\n", "", aliceFrom))
			poll.Eventually(t, 15*time.Second, "genuine reply decides", func() bool {
				v, err := svc.Get(ctx, id)
				return err == nil && v.State != "pending"
			})
			if v, _ := svc.Get(ctx, id); v.State != envelope.DecisionGranted || v.DecidedBy != "alice@example.org" || v.Channel != envelope.ChannelEmail {
				t.Fatalf("decision %q by %q on %q", v.State, v.DecidedBy, v.Channel)
			}
		})
	}
}

// TestIntakeConversationSenderVerification: mail to an agent's address
// delivered into a real IMAP mailbox (go-imap's server and Dovecot) reaches
// a real conversations router through the intake. Mail whose From is not
// one clean mailbox, or whose DMARC pass names no domain, is rejected with
// that reason and starts no turn, though its results would pass for the
// address beachd used to read; the genuine mail starts one.
func TestIntakeConversationSenderVerification(t *testing.T) {
	type peer struct {
		name string
		open func(t *testing.T) (cfg IntakeConfig, mta *mailbox)
	}
	for _, p := range []peer{
		{"go-imap", func(t *testing.T) (IntakeConfig, *mailbox) {
			d := startDevServer(t)
			return devIntakeConfig(d), openMailbox(t, d.IMAPAddr(), d.Agent.Address, d.Agent.Password)
		}},
		{"dovecot", func(t *testing.T) (IntakeConfig, *mailbox) {
			d := startDovecot(t)
			return dovecotIntakeConfig(d, "INBOX"), openMailbox(t, d.addr(), dovecotUser, dovecotPass)
		}},
	} {
		t.Run(p.name, func(t *testing.T) {
			ctx := context.Background()
			cfg, mta := p.open(t)
			cfg.Parse = ParseOptions{ReplyDomain: "reply.beachd.test", ReplyLocal: "approvals", AuthServID: "mx.example.com"}
			db := storetest.Open(t, bolt.Options{})
			svc, err := approvals.New(approvals.Config{Secret: []byte(strings.Repeat("s", 32)), PublicURL: "https://beachd.example.org"},
				db, nopEnqueuer{}, nil, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			router, err := conversations.New(conversations.Config{Agents: map[string]conversations.AgentConfig{
				"travel": {Email: []string{"travel@agents.example.org"}, Allow: []string{"*@example.org"}},
			}, URLKey: []byte(strings.Repeat("k", 32))}, db, svc, nil, nil, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			runIntake(t, cfg, db, router)

			received := "Received: from relay.example.net (relay.example.net [203.0.113.9])\r\n" +
				"\tby mx.example.com (Postfix) with ESMTPS id 4TDz15; Mon, 2 Mar 2026 09:30:01 +0000\r\n"
			passing := received + "Authentication-Results: mx.example.com; dkim=pass header.d=example.org; dmarc=pass header.from=example.org\r\n"
			mail := func(id, top, from string) string {
				return top + "From: " + from + "\r\nTo: Travel <travel@agents.example.org>\r\nSubject: Flights to Lisbon\r\n" +
					"Message-ID: <" + id + ">\r\nDate: Mon, 2 Mar 2026 09:30:00 +0000\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
					"Which flights are there on Friday?\r\n"
			}
			for _, tc := range []struct{ id, top, from, disposition, reason string }{
				{"cnv-unclean@evil.example", received + "Authentication-Results: mx.example.com; dkim=pass header.d=evil.example; dmarc=pass\r\n",
					"mallory@evil.example <alice@example.org", envelope.DispositionRejected, "From is not one RFC 5322 mailbox"},
				{"cnv-nodomain@evil.example", received + "Authentication-Results: mx.example.com; dkim=pass header.d=evil.example; dmarc=pass\r\n",
					aliceFrom, envelope.DispositionRejected, "dmarc=pass names no header.from"},
				{"cnv-group@evil.example", passing, "Friends: alice@example.org;", envelope.DispositionRejected, "From is a group"},
				{"cnv-genuine@example.org", passing, aliceFrom, envelope.DispositionTurn, ""},
			} {
				mta.appendMsg("INBOX", mail(tc.id, tc.top, tc.from))
				var rec *store.InboundRecord
				poll.Eventually(t, 15*time.Second, tc.id+" recorded", func() bool {
					rec, err = db.InboundByMessageID(ctx, envelope.ChannelEmail, tc.id)
					return err == nil && rec != nil
				})
				if rec.Disposition != tc.disposition || !strings.Contains(rec.Reason, tc.reason) {
					t.Errorf("%s: %s %q, want %s with %q", tc.id, rec.Disposition, rec.Reason, tc.disposition, tc.reason)
				}
				if tc.disposition == envelope.DispositionRejected && (rec.TurnID != "" || rec.ConversationID != "") {
					t.Errorf("%s: to be rejected, yet it has turn %q in conversation %q", tc.id, rec.TurnID, rec.ConversationID)
				}
				if tc.disposition == envelope.DispositionTurn && rec.TurnID == "" {
					t.Errorf("%s: the genuine mail started no turn", tc.id)
				}
			}
		})
	}
}
