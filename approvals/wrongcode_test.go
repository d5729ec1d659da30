package approvals

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/answers")

// golden compares what a person reads with testdata/answers/name, the
// codes in it replaced by <code> (they are drawn at random).
func golden(t *testing.T, name, got string, codes ...string) {
	t.Helper()
	for _, c := range codes {
		got = regexp.MustCompile(`\b`+c+`\b`).ReplaceAllString(got, "<code>")
	}
	path := filepath.Join("testdata", "answers", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s:\n got %q\nwant %q", name, got, want)
	}
}

// A mistyped code from the number a request was sent to gets an answer
// about that request — the code does not match; reply YES <code> or NO
// <code> — and the request stays pending. Codes of another length that read
// as an answer are mistyped codes too; a text that does not read as an
// answer is not answered; a number with no request waiting is not told
// anything.
func TestMistypedCodeIsAnswered(t *testing.T) {
	for _, channel := range []string{"sms", "whatsapp"} {
		t.Run(channel, func(t *testing.T) {
			h := newHarness(t, harnessOpt{})
			to := envelope.Recipient{Channel: channel, Address: aliceNum}
			hd := h.handle(h.ingest(h.suspend("appr-typo"), to)[0])
			wrong := wrongCode(hd.Code, 1)
			for i, text := range []string{"YES " + wrong, "yes " + hd.Code[:5], "NO, " + wrong + "1"} {
				res := h.inbound(envelope.Inbound{Channel: channel, From: aliceNum, MessageID: fmt.Sprint("T", i), Text: text})
				if res.Outcome != OutcomeWrongCode || res.ApprovalID != "appr-typo" {
					t.Fatalf("%q: %+v, want wrong-code about appr-typo", text, res)
				}
			}
			if a := h.approval("appr-typo"); a.State != store.ApprovalPending {
				t.Fatalf("the approval is %s", a.State)
			}
			told := h.told(aliceNum)
			if len(told) != 3 || told[0] != told[1] || told[1] != told[2] {
				t.Fatalf("answers %q", told)
			}
			if !strings.Contains(told[0], "Reply YES "+hd.Code+" or NO "+hd.Code) || strings.Contains(told[0], wrong) {
				t.Fatalf("answer %q: want the right code, not the wrong one", told[0])
			}
			golden(t, "wrong-code."+channel+".txt", told[0], hd.Code)
			// Not read as an answer: left to the conversation (unknown
			// code, or no code at all), and nothing is said.
			for i, text := range []string{"yes 2 people", "my booking " + wrong + " is late", "yes please"} {
				res := h.inbound(envelope.Inbound{Channel: channel, From: aliceNum, MessageID: fmt.Sprint("C", i), Text: text})
				if res.Outcome != OutcomeUnknownToken && res.Outcome != OutcomeNoToken && res.Outcome != OutcomeNotUnderstood {
					t.Fatalf("%q: %+v", text, res)
				}
			}
			if n := len(h.told(aliceNum)); n != 3 {
				t.Fatalf("%d answers after texts that are not answers", n)
			}
			// Another number has no request waiting: nothing to tell it.
			if res := h.inbound(envelope.Inbound{Channel: channel, From: bobNum, MessageID: "B", Text: "YES " + hd.Code}); res.Outcome != OutcomeUnknownToken {
				t.Fatalf("a code from a number with no request: %+v", res)
			}
			if got := h.told(bobNum); len(got) != 0 {
				t.Fatalf("a number with no request was told %q", got)
			}
		})
	}
}

// With several requests waiting for the number, the answer lists each
// with its own code.
func TestMistypedCodeListsEveryWaitingRequest(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	a := h.handle(h.ingest(h.suspend("appr-one"), sms(aliceNum))[0])
	b := h.handle(h.ingest(h.suspend("appr-two"), sms(aliceNum))[0])
	res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "T", Text: "yes " + wrongCode(a.Code+b.Code, 7)})
	if res.Outcome != OutcomeWrongCode || res.ApprovalID != "" {
		t.Fatalf("%+v", res)
	}
	told := h.told(aliceNum)
	if len(told) != 1 || !strings.Contains(told[0], "Reply YES "+a.Code) || !strings.Contains(told[0], "Reply YES "+b.Code) {
		t.Fatalf("answer %q", told)
	}
	golden(t, "wrong-code-two.sms.txt", told[0], a.Code, b.Code)
}

// After MaxWrongCodes the code is locked for the number: the next texts
// that read as answers get one answer, once per lock, with no code; the
// right code is refused too (and answered by that same single message).
func TestMistypedCodesLockWithoutACode(t *testing.T) {
	h := newHarness(t, harnessOpt{cfg: func(c *Config) { c.MaxWrongCodes = 3 }})
	hd := h.handle(h.ingest(h.suspend("appr-lock"), sms(aliceNum))[0])
	var outcomes []string
	for i := range 6 {
		res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: fmt.Sprint("W", i), Text: "YES " + wrongCode(hd.Code, i)})
		outcomes = append(outcomes, res.Outcome)
	}
	if got := strings.Join(outcomes, " "); got != "wrong-code wrong-code rate-limited rate-limited rate-limited rate-limited" {
		t.Fatalf("outcomes %s", got)
	}
	if res := h.inbound(envelope.Inbound{Channel: "sms", From: aliceNum, MessageID: "R", Text: "YES " + hd.Code}); res.Outcome != OutcomeRateLimited {
		t.Fatalf("the right code while locked: %+v", res)
	}
	told := h.told(aliceNum)
	if len(told) != 3 {
		t.Fatalf("%d answers, want two showing the code and one saying it is locked: %q", len(told), told)
	}
	if strings.Contains(told[2], hd.Code) || !strings.HasPrefix(told[2], "Too many wrong codes for this request: ") {
		t.Fatalf("the lock's answer %q", told[2])
	}
	golden(t, "code-locked.sms.txt", told[2])
	if a := h.approval("appr-lock"); a.State != store.ApprovalPending {
		t.Fatalf("decided while locked: %s", a.State)
	}
}

// A bare right code (no YES or NO) gets the request again with its code,
// at most once a day, and is no decision.
func TestBareCodeIsAnsweredWithTheRequest(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	hd := h.handle(h.ingest(h.suspend("appr-bare"), wa(aliceNum))[0])
	res := h.inbound(envelope.Inbound{Channel: "whatsapp", From: aliceNum, MessageID: "B1", Text: hd.Code})
	if res.Outcome != OutcomeNotUnderstood || res.ApprovalID != "appr-bare" {
		t.Fatalf("%+v", res)
	}
	told := h.told(aliceNum)
	if len(told) != 1 || !strings.Contains(told[0], "Reply YES "+hd.Code+" or NO "+hd.Code) {
		t.Fatalf("answer %q", told)
	}
	golden(t, "not-understood.whatsapp.txt", told[0], hd.Code)
}
