package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
)

// uniq drops repeats from s, keeping the first of each.
func uniq(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

var crashMarker = regexp.MustCompile(`cv\d{5}`)

// convInbound is one inbound message of the crash loop.
type convInbound struct {
	channel, from, marker, sid string
	accepted                   bool // SMS: the webhook answered 2xx (mail: always, once processed)
	posts                      int  // SMS: webhook posts (a repeat is Twilio's retry)
}

// TestCrashLoopConversations: people write to the agent by mail (filed
// into the Dovecot mailbox the intake reads) and by SMS (the signed Twilio
// webhook) while the built daemon is SIGKILLed at random moments (≥ 10
// times; 40 with -stress.long). A webhook that got no 2xx is posted again
// with the same MessageSid, as Twilio's retry would. In the end every mail
// has left the inbox and every accepted message made exactly one turn at
// the a2a-go agent (counted by A2A messageId: a repeat of one messageId is
// one turn, two messageIds for one message fail), every answer reached the
// person (SMTP sink, fake Twilio), and the bbolt file passes its check.
func TestCrashLoopConversations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	kills := 12
	if *stressLong || os.Getenv("BEACHD_STRESS_LONG") != "" {
		kills = 40
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill timing seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))

	ag := agenttest.Start()
	t.Cleanup(ag.Close)
	rec := startAgentRecorder(t, ag.URL)
	mp := startMailPeer(t)
	sink := &smtptest.Server{Keep: true}
	smtpPort, _ := smtptest.Start(t, sink, smtptest.Plain)
	tw := twiliotest.Start(t, fakeTwilioAccount, fakeTwilioToken)
	cd := startConvDaemon(t, rec.URL, mp, smtpPort, tw.URL, "")

	var mu sync.Mutex
	var inbound []*convInbound
	seq := 0
	next := func(channel string) *convInbound {
		mu.Lock()
		defer mu.Unlock()
		seq++
		in := &convInbound{channel: channel, marker: fmt.Sprintf("cv%05d", seq)}
		if channel == "email" {
			in.from = fmt.Sprintf("p%02d@people.test", seq%10)
		} else {
			in.from = fmt.Sprintf("+4477009%05d", seq%10)
			in.sid = fmt.Sprintf("SM%032d", seq)
		}
		inbound = append(inbound, in)
		return in
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	postSMS := func(in *convInbound) {
		code, _ := cd.sms(hc, in.sid, in.from, "Crash text "+in.marker)
		mu.Lock()
		in.posts++
		in.accepted = in.accepted || code/100 == 2
		mu.Unlock()
	}
	unaccepted := func() []*convInbound {
		mu.Lock()
		defer mu.Unlock()
		var out []*convInbound
		for _, in := range inbound {
			if in.channel == "sms" && !in.accepted {
				out = append(out, in)
			}
		}
		return out
	}

	imapc := mp.login()
	defer imapc.Close()
	appendErr := make(chan error, 1)
	start := time.Now()
	for k := 0; k < kills; k++ {
		cd.start()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		// Twilio's retry of the webhooks that got no 2xx.
		for _, in := range unaccepted() {
			postSMS(in)
		}
		wg.Add(2)
		go func() { // mail keeps arriving whatever the daemon does
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				in := next("email")
				if err := appendMail(imapc, plainMail(in.from, convAgentEmail, "Crash "+in.marker, "<"+in.marker+"@people.test>", "", "Crash mail "+in.marker)); err != nil {
					appendErr <- err
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				postSMS(next("sms"))
				time.Sleep(50 * time.Millisecond)
			}
		}()
		// A random moment: with mail and webhooks arriving and turns in flight.
		time.Sleep(time.Duration(200+rng.IntN(1300)) * time.Millisecond)
		cd.kill()
		close(stop)
		wg.Wait()
		select {
		case err := <-appendErr:
			t.Fatal(err)
		default:
		}
		// Mail goes on arriving while the daemon is down.
		for i := rng.IntN(3); i >= 0; i-- {
			in := next("email")
			mp.deliver(imapc, plainMail(in.from, convAgentEmail, "Crash "+in.marker, "<"+in.marker+"@people.test>", "", "Crash mail "+in.marker))
		}
	}
	cd.start()
	for _, in := range unaccepted() {
		postSMS(in)
	}
	mu.Lock()
	all := append([]*convInbound(nil), inbound...)
	mu.Unlock()
	for _, in := range all {
		if in.channel == "sms" && !in.accepted {
			t.Fatalf("webhook %s never accepted by the running daemon", in.sid)
		}
	}

	// Every message makes one turn, and its answer reaches the person.
	var answers map[string]int        // channel|person|marker → answers sent
	var answerIDs map[string][]string // the same → Message-ID or Twilio SID of each
	countAnswers := func() {
		answers, answerIDs = map[string]int{}, map[string][]string{}
		for _, m := range sink.Messages() {
			text := string(m.Raw)
			if pm, err := mail.ReadMessage(bytes.NewReader(m.Raw)); err == nil {
				text = mailText(pm)
			}
			for _, mk := range uniq(crashMarker.FindAllString(text, -1)) {
				for _, to := range m.To {
					answers["email|"+to+"|"+mk]++
					answerIDs["email|"+to+"|"+mk] = append(answerIDs["email|"+to+"|"+mk], m.MessageID)
				}
			}
		}
		for _, m := range tw.Created() {
			for _, mk := range uniq(crashMarker.FindAllString(m.Body, -1)) {
				answers["sms|"+m.To+"|"+mk]++
				answerIDs["sms|"+m.To+"|"+mk] = append(answerIDs["sms|"+m.To+"|"+mk], m.SID+" "+m.Body)
			}
		}
	}
	answered := func(in *convInbound) int { return answers[in.channel+"|"+in.from+"|"+in.marker] }
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var missingTurn, missingAnswer []string
		countAnswers()
		for _, in := range all {
			turns := rec.Turns(in.marker)
			switch n := distinctMessages(turns); {
			case n > 1:
				t.Fatalf("%s %s made %d turns (distinct messageIds) at the agent: %+v", in.channel, in.marker, n, turns)
			case n == 0:
				missingTurn = append(missingTurn, fmt.Sprintf("%s %s (%d posts)", in.channel, in.marker, in.posts))
			default:
				if answered(in) == 0 {
					missingAnswer = append(missingAnswer, in.channel+" "+in.marker)
				}
			}
		}
		if len(missingTurn) == 0 && len(missingAnswer) == 0 && mp.count(imapc, "INBOX") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Logf("the inbound records of the messages without a turn:\n%s", cd.inboundFor(missingTurn))
			t.Fatalf("after %d kills: %d of %d messages made no turn %v, %d turns unanswered %v, %d mails left in the inbox\n%s",
				kills, len(missingTurn), len(all), missingTurn, len(missingAnswer), missingAnswer, mp.count(imapc, "INBOX"), cd.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second) // a late second turn would show now
	countAnswers()
	mails, sms, requests, dupAnswers := 0, 0, 0, 0
	dupByChannel, dupSample := map[string]int{}, []string(nil)
	for _, in := range all {
		turns := rec.Turns(in.marker)
		if n := distinctMessages(turns); n != 1 {
			t.Errorf("%s %s made %d turns", in.channel, in.marker, n)
		}
		requests += len(turns)
		dupAnswers += answered(in) - 1
		if answered(in) > 1 {
			ids := answerIDs[in.channel+"|"+in.from+"|"+in.marker]
			if in.channel == "email" && len(uniq(ids)) > 1 {
				t.Errorf("mail %s was answered by %d different messages %v: one turn, one answer delivery", in.marker, len(uniq(ids)), ids)
			}
			dupByChannel[in.channel]++
			if len(dupSample) < 3 {
				dupSample = append(dupSample, fmt.Sprintf("%s %s: %q", in.channel, in.marker, answerIDs[in.channel+"|"+in.from+"|"+in.marker]))
			}
		}
		if in.channel == "email" {
			mails++
		} else {
			sms++
		}
	}
	cd.stop()
	// A kill interrupts at most the sends in flight (dispatch.workers, 8).
	if bound := kills * 8; dupAnswers > bound {
		t.Errorf("%d duplicate answers for %d kills of 8 workers (bound %d)", dupAnswers, kills, bound)
	}

	boltCheck := "ok"
	db, err := bolt.Open(filepath.Join(cd.dataDir, "beachd.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		boltCheck = err.Error()
		t.Errorf("bbolt check: %v", err)
	}
	db.Close()
	t.Logf("kills %d: mails %d, SMS %d, one turn each (%d send requests for %d turns), answers delivered to every person (%d duplicate answers; messages answered more than once by channel %v, e.g. %v), bbolt check %s; %s",
		kills, mails, sms, requests, len(all), dupAnswers, dupByChannel, dupSample, boltCheck, time.Since(start).Round(time.Second))
}
