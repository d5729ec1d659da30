package email

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// testDKIMKey is a signing key and the TXT record that publishes it.
type testDKIMKey struct {
	name   string
	pem    []byte
	record string
}

func newTestDKIMKeys(t *testing.T) []testDKIMKey {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rpub, err := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	epub, ek, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	eder, err := x509.MarshalPKCS8PrivateKey(ek)
	if err != nil {
		t.Fatal(err)
	}
	return []testDKIMKey{
		{"rsa", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)}),
			"v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(rpub)},
		{"ed25519", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: eder}),
			"v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(epub)},
	}
}

const (
	dkimTestDomain   = "beachd.test"
	dkimTestSelector = "sel1"
)

// msgauthVerify verifies raw's DKIM signature with go-msgauth against the
// published record: nil when it has one signature and it verifies.
func msgauthVerify(raw []byte, record string) error {
	vs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{
		LookupTXT: func(name string) ([]string, error) {
			if name != dkimTestSelector+"._domainkey."+dkimTestDomain {
				return nil, fmt.Errorf("no TXT record at %s", name)
			}
			return []string{record}, nil
		},
	})
	if err != nil {
		return err
	}
	if len(vs) != 1 {
		return fmt.Errorf("%d signatures", len(vs))
	}
	return vs[0].Err
}

// dkimpyVerify verifies each message with dkimpy (testdata/dkim/verify.py,
// Debian's python3-dkim) and returns whether each passed. Without dkimpy
// the test is skipped, loudly, and under CI it fails.
func dkimpyVerify(t *testing.T, record string, msgs map[string][]byte) map[string]bool {
	t.Helper()
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import dkim, nacl").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("SKIPPING the dkimpy checks: dkimpy is not installed (run scripts/peers/dkimpy.sh as root): %v %s", err, out)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "record.txt")
	if err := os.WriteFile(rec, []byte(record), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"testdata/dkim/verify.py", dkimTestSelector + "._domainkey." + dkimTestDomain, rec}
	names := make([]string, 0, len(msgs))
	for name := range msgs {
		names = append(names, name)
	}
	slices.Sort(names)
	files := map[string]string{}
	for i, name := range names {
		f := filepath.Join(dir, fmt.Sprintf("m%03d.eml", i))
		if err := os.WriteFile(f, msgs[name], 0o600); err != nil {
			t.Fatal(err)
		}
		files[f] = name
		args = append(args, f)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(py, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("dkimpy: %v\n%s", err, stderr.String())
	}
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		f, verdict, ok := strings.Cut(line, " ")
		if name, known := files[f]; ok && known {
			got[name] = verdict == "pass"
		}
	}
	if len(got) != len(msgs) {
		t.Fatalf("dkimpy answered for %d of %d messages:\n%s\n%s", len(got), len(msgs), stdout.String(), stderr.String())
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("dkimpy:\n%s", stderr.String())
	}
	return got
}

// rawField is one header field of a raw message: its name and its lines,
// folded lines and final CRLF included.
type rawField struct{ name, text string }

func splitRaw(t *testing.T, raw []byte) ([]rawField, string) {
	t.Helper()
	head, body, ok := strings.Cut(string(raw), "\r\n\r\n")
	if !ok {
		t.Fatalf("no end of header in %q", raw)
	}
	var fs []rawField
	for _, line := range strings.SplitAfter(head+"\r\n", "\r\n") {
		switch {
		case line == "":
		case line[0] == ' ' || line[0] == '\t':
			fs[len(fs)-1].text += line
		default:
			name, _, _ := strings.Cut(line, ":")
			fs = append(fs, rawField{name, line})
		}
	}
	return fs, body
}

func joinRaw(fs []rawField, body string) []byte {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.text)
	}
	return []byte(b.String() + "\r\n" + body)
}

func fieldIndex(fs []rawField, name string) int {
	return slices.IndexFunc(fs, func(f rawField) bool { return strings.EqualFold(f.name, name) })
}

// A tamper changes a signed message as a relay could; nil when it does
// not apply to this message.
type tamper func(t *testing.T, fs []rawField, body string) ([]rawField, string)

// addAbove puts a field just below the DKIM-Signature (where a relay's
// field would go); addBelow at the bottom of the header, where a verifier
// looks first.
func addAbove(line string) tamper {
	return func(t *testing.T, fs []rawField, body string) ([]rawField, string) {
		i := fieldIndex(fs, "DKIM-Signature")
		return slices.Insert(slices.Clone(fs), i+1, rawField{text: line + "\r\n"}), body
	}
}

func addBelow(line string) tamper {
	return func(t *testing.T, fs []rawField, body string) ([]rawField, string) {
		return append(slices.Clone(fs), rawField{text: line + "\r\n"}), body
	}
}

func addWhenAbsent(name, value string) tamper {
	return func(t *testing.T, fs []rawField, body string) ([]rawField, string) {
		if fieldIndex(fs, name) >= 0 {
			return nil, ""
		}
		return addBelow(name+": "+value)(t, fs, body)
	}
}

// set replaces the field's value (nil when the message has no such field).
func set(name, value string) tamper {
	return func(t *testing.T, fs []rawField, body string) ([]rawField, string) {
		i := fieldIndex(fs, name)
		if i < 0 {
			return nil, ""
		}
		out := slices.Clone(fs)
		out[i] = rawField{name, name + ": " + value + "\r\n"}
		return out, body
	}
}

func remove(name string) tamper {
	return func(t *testing.T, fs []rawField, body string) ([]rawField, string) {
		i := fieldIndex(fs, name)
		if i < 0 {
			return nil, ""
		}
		return slices.Delete(slices.Clone(fs), i, i+1), body
	}
}

// dkimShapes are the kinds of message the sender writes, each delivered
// through a real SMTP transaction with signing on.
func dkimShapes(t *testing.T, key testDKIMKey) map[string][]byte {
	t.Helper()
	art := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		w.Write([]byte("%PDF-1.4 an itinerary\n" + strings.Repeat("x", 3000)))
	}))
	t.Cleanup(art.Close)
	withKey := func(more func(*SenderConfig)) func(*SenderConfig) {
		return func(c *SenderConfig) {
			c.DKIM = DKIMConfig{Domain: dkimTestDomain, Selector: dkimTestSelector, PrivateKeyPEM: key.pem}
			if more != nil {
				more(c)
			}
		}
	}
	send := func(mut func(*SenderConfig), withRenderer bool, j *channels.Job) []byte {
		be := &smtptest.Server{Keep: true}
		port, _ := smtptest.Start(t, be, TLSNone)
		s := newTestSender(t, port, withKey(mut), withRenderer)
		if _, err := s.Deliver(context.Background(), j); err != nil {
			t.Fatal(err)
		}
		raws := be.Raw()
		if len(raws) != 1 {
			t.Fatalf("%d messages", len(raws))
		}
		return raws[0]
	}
	exp := testNow.Add(24 * time.Hour)
	approval := func() *channels.Job {
		env := textEnvelope("I found a flight. Shall I book it?", dataPart(t, "approval-request", envelope.ApprovalRequest{
			ApprovalID: "ap1", ToolName: "book_flight", ToolCallID: "tc1", Args: map[string]any{"flight": "LH902"},
			Handler: "h", Turn: "t1", Session: "s1", ExpiresAt: &exp, Summary: "Book LH 902"}),
			dataPart(t, "artifact", envelope.Artifact{ArtifactID: "it", MimeType: "application/pdf", Name: "itinerary.pdf", URI: art.URL + "/it.pdf"}))
		j := job("dlv01dkim", "alice@example.com", env)
		j.Approvals = []render.ApprovalHandle{{ApprovalID: "ap1", Token: tokA, LinkURL: "https://beachd.test/a/x", ExpiresAt: exp,
			Request: envelope.ApprovalRequest{ApprovalID: "ap1", ToolName: "book_flight", Summary: "Book LH 902"}}}
		j.Delivery.Extra = map[string]string{ExtraInReplyTo: "<CAF3a@mail.gmail.com>", ExtraReferences: "<root@mail.gmail.com> <CAF3a@mail.gmail.com>"}
		return j
	}
	answer := job("dlv_0answer", "alice@example.com", textEnvelope("Here are three flights to Lisbon."))
	answer.Delivery.Extra = answerExtra()
	return map[string][]byte{
		"approval request (html, attachment, Reply-To, thread)": send(nil, true, approval()),
		"approval request, plain text":                          send(nil, false, approval()),
		"conversation answer":                                   send(withConvKey, true, answer),
		"no Reply-To, no thread":                                send(func(c *SenderConfig) { c.ReplyTo = "" }, false, job("dlv02dkim", "bob@example.com", textEnvelope("Done."))),
	}
}

// TestSenderDKIMSignature: every kind of message the sender writes carries
// a DKIM signature that go-msgauth's verifier and dkimpy both accept, over
// every header field a reader or a mail program acts on, each mentioned
// once more than it occurs. No change a relay could make to those fields —
// a second From or Subject above or below ours, a Reply-To where there was
// none, another Reply-To, In-Reply-To, References or Auto-Submitted, a
// loop marker removed — still verifies, with either verifier; a field
// outside the signature (Received) may be added.
func TestSenderDKIMSignature(t *testing.T) {
	tampers := []struct {
		name string
		do   tamper
	}{
		{"second From above", addAbove("From: Mallory <mallory@evil.example>")},
		{"second From below", addBelow("From: Mallory <mallory@evil.example>")},
		{"second Subject above", addAbove("Subject: Approve this instead")},
		{"second Subject below", addBelow("Subject: Approve this instead")},
		{"second To", addAbove("To: mallory@evil.example")},
		{"second Date", addAbove("Date: Tue, 03 Mar 2026 09:30:00 +0000")},
		{"second Message-ID", addAbove("Message-ID: <other@beachd.test>")},
		{"second Reply-To", addAbove("Reply-To: <mallory@evil.example>")},
		{"Reply-To added", addWhenAbsent("Reply-To", "<mallory@evil.example>")},
		{"Reply-To changed", set("Reply-To", "<approvals+"+tokA+"@evil.example>")},
		{"Reply-To removed", remove("Reply-To")},
		{"In-Reply-To added", addWhenAbsent("In-Reply-To", "<x@evil.example>")},
		{"In-Reply-To changed", set("In-Reply-To", "<x@evil.example>")},
		{"References changed", set("References", "<x@evil.example>")},
		{"References added", addWhenAbsent("References", "<x@evil.example>")},
		{"Auto-Submitted changed", set("Auto-Submitted", "no")},
		{"Auto-Submitted removed", remove("Auto-Submitted")},
		{"second Auto-Submitted", addBelow("Auto-Submitted: no")},
		{"X-Auto-Response-Suppress removed", remove("X-Auto-Response-Suppress")},
		{"Cc added", addBelow("Cc: mallory@evil.example")},
		{"Sender added", addBelow("Sender: mallory@evil.example")},
		{"List-Unsubscribe added", addBelow("List-Unsubscribe: <https://evil.example/u>")},
		{"Content-Type changed", set("Content-Type", "text/plain; charset=us-ascii")},
		{"body changed", func(t *testing.T, fs []rawField, body string) ([]rawField, string) {
			return fs, strings.Replace(body, "\r\n", "\r\nApprove\r\n", 1)
		}},
	}
	for _, key := range newTestDKIMKeys(t) {
		t.Run(key.name, func(t *testing.T) {
			shapes := dkimShapes(t, key)
			all := map[string][]byte{} // what dkimpy checks: name → message
			wantPass := map[string]bool{}
			for shape, raw := range shapes {
				fs, body := splitRaw(t, raw)
				if i := fieldIndex(fs, "DKIM-Signature"); i != 0 {
					t.Fatalf("%s: DKIM-Signature is field %d, not the first", shape, i)
				}
				checkHeaderKeys(t, shape, fs)
				if err := msgauthVerify(raw, key.record); err != nil {
					t.Errorf("%s: go-msgauth: the signed message does not verify: %v\n%s", shape, err, raw)
				}
				all[shape], wantPass[shape] = raw, true
				received := addAbove("Received: from beachd.test by relay.example.net; Mon, 2 Mar 2026 09:30:02 +0000")
				rfs, rbody := received(t, fs, body)
				all[shape+" + Received"], wantPass[shape+" + Received"] = joinRaw(rfs, rbody), true
				if err := msgauthVerify(joinRaw(rfs, rbody), key.record); err != nil {
					t.Errorf("%s: go-msgauth: a Received field added breaks the signature: %v", shape, err)
				}
				for _, tc := range tampers {
					tfs, tbody := tc.do(t, fs, body)
					if tfs == nil {
						continue
					}
					bad := joinRaw(tfs, tbody)
					if err := msgauthVerify(bad, key.record); err == nil {
						t.Errorf("%s, %s: go-msgauth still verifies", shape, tc.name)
					}
					all[shape+", "+tc.name] = bad
				}
			}
			for name, ok := range dkimpyVerify(t, key.record, all) {
				if ok != wantPass[name] {
					t.Errorf("dkimpy: %s: pass = %v, want %v", name, ok, wantPass[name])
				}
			}
		})
	}
}

// checkHeaderKeys: the signature's h= names each signed field once more
// than the message has it.
func checkHeaderKeys(t *testing.T, shape string, fs []rawField) {
	t.Helper()
	sig := fs[fieldIndex(fs, "DKIM-Signature")].text
	sig = strings.Join(strings.Fields(sig), "")
	_, h, ok := strings.Cut(sig, ";h=")
	if !ok {
		t.Fatalf("%s: no h= in %s", shape, sig)
	}
	h, _, _ = strings.Cut(h, ";")
	count := map[string]int{}
	for _, k := range strings.Split(h, ":") {
		count[strings.ToLower(k)]++
	}
	for _, k := range dkimSignedFields {
		n := 0
		for _, f := range fs {
			if strings.EqualFold(f.name, k) {
				n++
			}
		}
		if count[strings.ToLower(k)] != n+1 {
			t.Errorf("%s: h= names %s %d times; the message has %d", shape, k, count[strings.ToLower(k)], n)
		}
	}
	for _, k := range []string{"From", "Subject", "Date", "Message-ID", "To", "Auto-Submitted", "Content-Type", "MIME-Version"} {
		if fieldIndex(fs, k) < 0 {
			t.Errorf("%s: no %s field", shape, k)
		}
	}
}

// TestDKIMOverSigningSemantics pins what over-signing relies on in
// go-msgauth: a name mentioned in h= once per field signs those fields
// only, and a field of that name added above them still verifies; one more
// mention signs the absence of another, and any added one, above or below,
// breaks the signature.
func TestDKIMOverSigningSemantics(t *testing.T) {
	key := newTestDKIMKeys(t)[1]
	signer, err := newDKIMSigner(dkimTestDomain, dkimTestSelector, key.pem)
	if err != nil {
		t.Fatal(err)
	}
	msg := "From: Alice <alice@beachd.test>\r\nTo: bob@example.com\r\nSubject: hi\r\n\r\nhello\r\n"
	sign := func(keys []string) []byte {
		s, err := dkim.NewSigner(&dkim.SignOptions{Domain: dkimTestDomain, Selector: dkimTestSelector, Signer: signer.key,
			HeaderKeys: keys, HeaderCanonicalization: dkim.CanonicalizationRelaxed, BodyCanonicalization: dkim.CanonicalizationRelaxed})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return []byte(s.Signature() + msg)
	}
	for _, tc := range []struct {
		keys       []string
		add        tamper
		stillValid bool
	}{
		{[]string{"From", "To", "Subject"}, addAbove("From: mallory@evil.example"), true},
		{[]string{"From", "To", "Subject"}, addBelow("From: mallory@evil.example"), false},
		{[]string{"From", "To", "Subject"}, addBelow("Reply-To: mallory@evil.example"), true},
		{[]string{"From", "From", "To", "Subject"}, addAbove("From: mallory@evil.example"), false},
		{[]string{"From", "From", "To", "Subject"}, addBelow("From: mallory@evil.example"), false},
		{[]string{"From", "To", "Subject", "Reply-To"}, addBelow("Reply-To: mallory@evil.example"), false},
		{[]string{"From", "To", "Subject", "Reply-To"}, addAbove("Reply-To: mallory@evil.example"), false},
	} {
		raw := sign(tc.keys)
		if err := msgauthVerify(raw, key.record); err != nil {
			t.Fatalf("h=%v: the signed message does not verify: %v", tc.keys, err)
		}
		fs, body := splitRaw(t, raw)
		fs, body = tc.add(t, fs, body)
		err := msgauthVerify(joinRaw(fs, body), key.record)
		if (err == nil) != tc.stillValid {
			t.Errorf("h=%v, %s: verifies = %v, want %v (%v)", tc.keys, strings.TrimSpace(fs[1].text+fs[len(fs)-1].text), err == nil, tc.stillValid, err)
		}
	}
	keys, err := dkimHeaderKeys([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys, ":"); !strings.HasPrefix(got, "From:From:Sender:Reply-To:To:To:Cc:Subject:Subject:") {
		t.Errorf("h=%s", got)
	}
}

func TestDKIMSignerRefusesBadKeys(t *testing.T) {
	for name, k := range map[string][]byte{
		"not PEM":   []byte("not a key"),
		"a cert":    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}),
		"truncated": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{0x30, 0x2e, 0x02, 0x01}}),
	} {
		if _, err := newDKIMSigner(dkimTestDomain, dkimTestSelector, k); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
