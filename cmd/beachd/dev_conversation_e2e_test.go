package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/channels/twilio"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// devSay posts a JSON message to /dev/reply.
func (d *devDaemon) devSay(body string) twilio.DevReplyResult {
	d.t.Helper()
	resp, err := http.Post(d.base+"/dev/reply", "application/json", strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		d.t.Fatalf("dev reply: %d %s", resp.StatusCode, b)
	}
	var res twilio.DevReplyResult
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&res); err != nil {
		d.t.Fatalf("dev reply answered %q: %v", b, err)
	}
	return res
}

// conversationsWired fails t when the decider behind the dev channels is
// approvals alone: a message without a code then decides nothing
// ("no-token") instead of starting a turn.
func conversationsWired(t *testing.T, res twilio.DevReplyResult) {
	t.Helper()
	if res.Outcome == "no-token" {
		t.Fatal("conversations are not wired into `beachd dev`: a message without a code gave no-token")
	}
}

// TestDevConversationSMS: in `beachd dev`, an SMS without an approval code
// posted to /dev/reply starts a conversation with the dev agent; its answer
// is recorded as an SMS back to the person from the agent's number, and
// quotes the text and names the attachment; the person's next message
// continues the same conversation (turn 2). The dev agent speaks A2A 1.0,
// then 0.3.
func TestDevConversationSMS(t *testing.T) {
	for _, gen := range []string{agent.V10, agent.V03} {
		t.Run(gen, func(t *testing.T) { devConversationSMS(t, gen) })
	}
}

func devConversationSMS(t *testing.T, gen string) {
	// The photo below is served on loopback, which only fetch.allow opens.
	d := startDev(t, func(c *config.Config) { c.DevAgentA2A = gen; c.Fetch.Allow = []string{"127.0.0.1"} })
	const person = "+447700900777"
	res := d.devSay(`{"channel":"sms","from":"` + person + `","text":"Flights to Lisbon for six?",
		"media":[{"mediaType":"text/csv","filename":"travellers.csv","data":"YSxiCmMsZAo="}]}`)
	conversationsWired(t, res)
	if res.Outcome != envelope.DispositionTurn || !strings.HasPrefix(res.Conversation, "cnv_") || res.To != devAgentNumber {
		t.Fatalf("first message: %+v", res)
	}
	answer := func(n string) string {
		var body string
		poll.Eventually(t, 20*time.Second, "the dev agent's answer "+n, func() bool {
			for _, m := range d.messages().Messages {
				if m.Channel == "sms" && m.To == person && strings.Contains(m.Body, "turn "+n+" of conversation "+res.Conversation) {
					body = m.Body
					return true
				}
			}
			return false
		})
		return body
	}
	first := answer("1")
	for _, w := range []string{`"Flights to Lisbon for six?"`, "travellers.csv (text/csv, 8 bytes)"} {
		if !strings.Contains(first, w) {
			t.Errorf("answer %q lacks %q", first, w)
		}
	}
	again := d.devSay(`{"channel":"sms","from":"` + person + `","text":"Make it seven."}`)
	if again.Outcome != envelope.DispositionTurn || again.Conversation != res.Conversation {
		t.Fatalf("second message: %+v, want a turn in %s", again, res.Conversation)
	}
	if second := answer("2"); !strings.Contains(second, `"Make it seven."`) {
		t.Errorf("second answer %q", second)
	}

	// WhatsApp, with a photo given by URL: beachd fetches it (through the
	// guarded client, here allowed loopback) and hands it to the agent.
	photos := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/jpeg")
		w.Write([]byte("jpeg!"))
	}))
	defer photos.Close()
	wa := d.devSay(`{"channel":"whatsapp","from":"` + person + `","text":"Here is the photo.",
		"media":[{"mediaType":"image/jpeg","filename":"photo.jpg","url":"` + photos.URL + `/photo.jpg"}]}`)
	if wa.Outcome != envelope.DispositionTurn || wa.Conversation == "" || wa.Conversation == res.Conversation {
		t.Fatalf("whatsapp message: %+v, want a turn in a new conversation", wa)
	}
	poll.Eventually(t, 20*time.Second, "the dev agent's WhatsApp answer", func() bool {
		for _, m := range d.messages().Messages {
			if m.Channel == "whatsapp" && m.To == person && strings.Contains(m.Body, "turn 1 of conversation "+wa.Conversation) &&
				strings.Contains(m.Body, "photo.jpg (image/jpeg, 5 bytes)") {
				return true
			}
		}
		return false
	})
}

// TestDevConversationEmail: a new mail from the person to the dev agent's
// inbound address, through the dev SMTP server, reaches the intake and
// starts a conversation; the answer lands in the person's mailbox from that
// address, in the thread ("Re: …"), and a reply to it continues the
// conversation.
func TestDevConversationEmail(t *testing.T) {
	d := startDev(t)
	probe := d.devSay(`{"channel":"sms","from":"+447700900778","text":"Hello?"}`)
	conversationsWired(t, probe)
	d.sendMail("you@beachd.localhost", devAgentEmail, "From: You <you@beachd.localhost>\nTo: "+devAgentEmail+
		"\nSubject: Flights to Lisbon\nMessage-ID: <first-lisbon@beachd.localhost>\nContent-Type: text/plain; charset=utf-8\n\nSix of us, in May.\n")
	var got []string
	poll.Eventually(t, 30*time.Second, "the dev agent's answer by mail", func() bool {
		got = got[:0]
		for _, m := range d.inbox("Re: Flights to Lisbon") {
			b, _ := io.ReadAll(m.Body)
			if strings.Contains(string(b), "turn 1 of conversation") {
				got = append(got, m.Header.Get("From")+"\n"+m.Header.Get("Reply-To")+"\n"+m.Header.Get("In-Reply-To")+"\n"+string(b))
			}
		}
		return len(got) == 1
	})
	lines := strings.SplitN(got[0], "\n", 4)
	if !strings.Contains(lines[0], devAgentEmail) || !strings.Contains(lines[2], "first-lisbon@beachd.localhost") ||
		!strings.Contains(lines[3], "Six of us, in May.") {
		t.Fatalf("answer:\n%s", got[0])
	}
	replyTo := strings.Trim(lines[1][strings.LastIndexByte(lines[1], '<')+1:], "<> ")
	if !strings.HasPrefix(replyTo, "agent+") {
		t.Fatalf("Reply-To %q is not the agent's conversation address", lines[1])
	}
	d.sendMail("you@beachd.localhost", replyTo, "From: You <you@beachd.localhost>\nTo: "+replyTo+
		"\nSubject: Re: Flights to Lisbon\nMessage-ID: <second-lisbon@beachd.localhost>\nIn-Reply-To: <first-lisbon@beachd.localhost>\n"+
		"Content-Type: text/plain; charset=utf-8\n\nMake it seven.\n")
	poll.Eventually(t, 30*time.Second, "the answer to the reply", func() bool {
		for _, m := range d.inbox("Re: Flights to Lisbon") {
			b, _ := io.ReadAll(m.Body)
			if strings.Contains(string(b), "turn 2 of conversation") && strings.Contains(string(b), "Make it seven.") {
				return true
			}
		}
		return false
	})
}

// The dev mail server behaves as a submission server: two identical
// hand-written mails without a Message-ID are two messages (it adds one),
// and after a restart of `beachd dev` on the same data dir — its mail
// server empty again, numbering from 1 under the same UIDVALIDITY — a new
// mail is still read (the intake's old cursor is dropped).
func TestDevMailByHandAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	raw := "From: you@beachd.localhost\r\nTo: " + devAgentEmail + "\r\nSubject: Flights to Lisbon\r\n\r\nAny flights on Friday?\r\n"
	turns := func(d *devDaemon) int {
		var out struct {
			Inbound []struct{ Channel, Disposition string }
		}
		d.do("GET", "/v1/inbound?channel=email", nil, "", &out)
		n := 0
		for _, in := range out.Inbound {
			if in.Disposition == envelope.DispositionTurn {
				n++
			}
		}
		return n
	}
	d := startDev(t, func(c *config.Config) { c.DataDir = dir })
	for i := 1; i <= 2; i++ {
		d.sendMail("you@beachd.localhost", devAgentEmail, raw)
		poll.Eventually(t, 20*time.Second, "the mail as a turn", func() bool { return turns(d) == i })
	}
	d.cancel()
	err := <-d.done
	d.done <- err // for startDev's cleanup
	if err != nil {
		t.Fatal(err)
	}
	d2 := startDev(t, func(c *config.Config) { c.DataDir = dir })
	d2.sendMail("you@beachd.localhost", devAgentEmail, raw)
	poll.Eventually(t, 20*time.Second, "the mail after the restart as a turn", func() bool { return turns(d2) == 3 })
}
