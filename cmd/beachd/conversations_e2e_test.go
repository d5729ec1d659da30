package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/twilio/twiliotest"
	dovecotkit "github.com/cool-ai/beachd/internal/testkit/dovecot"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/agent/agenttest"
	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/channels/twilio"
)

// The peers of the conversation tests: a standalone Dovecot holding the
// agent's mailbox (the daemon's IMAP intake reads it), Prism serving
// Twilio's OpenAPI description behind a recorder, and a recorder in front
// of a real A2A agent that notes every turn it is sent.

// mailPeer is the test kit's standalone Dovecot with one mailbox "agent".
type mailPeer struct {
	*dovecotkit.Server
	t *testing.T
}

const mailPeerUser, mailPeerPass = "agent", "dovecot-pw"

func startMailPeer(t *testing.T) *mailPeer {
	t.Helper()
	return &mailPeer{Server: dovecotkit.Start(t, "conversation tests", mailPeerUser, mailPeerPass), t: t}
}

func (p *mailPeer) addr() string { return p.Addr() }

// yaml is the daemon's email.imap block for this mailbox.
func (p *mailPeer) yaml() string {
	return fmt.Sprintf("{host: 127.0.0.1, port: %d, username: %s, password: %s, tls: none, mailbox: INBOX, processed: Processed, poll_interval: 2s}",
		p.Port, mailPeerUser, mailPeerPass)
}

// login opens an IMAP session on the agent's mailbox.
func (p *mailPeer) login() *imapclient.Client {
	p.t.Helper()
	c, err := imapclient.DialInsecure(p.addr(), nil)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := c.Login(mailPeerUser, mailPeerPass).Wait(); err != nil {
		c.Close()
		p.t.Fatal(err)
	}
	return c
}

// deliver files raw into INBOX as an MTA would and returns when Dovecot
// has it.
func (p *mailPeer) deliver(c *imapclient.Client, raw string) {
	p.t.Helper()
	if err := appendMail(c, raw); err != nil {
		p.t.Fatal(err)
	}
}

// appendMail is deliver for another goroutine than the test's.
func appendMail(c *imapclient.Client, raw string) error {
	raw = strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\n", "\r\n")
	cmd := c.Append("INBOX", int64(len(raw)), nil)
	if _, err := cmd.Write([]byte(raw)); err != nil {
		return fmt.Errorf("append: %w", err)
	}
	if err := cmd.Close(); err != nil {
		return fmt.Errorf("append: %w", err)
	}
	if _, err := cmd.Wait(); err != nil {
		return fmt.Errorf("append: %w", err)
	}
	return nil
}

// count is the number of messages in mailbox (0 when it does not exist).
func (p *mailPeer) count(c *imapclient.Client, mailbox string) int {
	st, err := c.Status(mailbox, &imap.StatusOptions{NumMessages: true}).Wait()
	if err != nil || st.NumMessages == nil {
		return 0
	}
	return int(*st.NumMessages)
}

// mailWithAttachment is a multipart mail with a text part and one file.
func mailWithAttachment(from, to, subject, msgID, headers, text, filename, mediaType string, data []byte) string {
	const b = "conv-boundary-42"
	enc := base64.StdEncoding.EncodeToString(data)
	var lines []string
	for len(enc) > 76 {
		lines, enc = append(lines, enc[:76]), enc[76:]
	}
	lines = append(lines, enc)
	return fmt.Sprintf("From: %s\nTo: %s\nSubject: %s\nMessage-ID: %s\nDate: %s\n%sMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=%q\n\n--%s\nContent-Type: text/plain; charset=utf-8\n\n%s\n--%s\nContent-Type: %s\nContent-Disposition: attachment; filename=%q\nContent-Transfer-Encoding: base64\n\n%s\n--%s--\n",
		from, to, subject, msgID, time.Now().Format(time.RFC1123Z), headers, b, b, text, b, mediaType, filename, strings.Join(lines, "\n"), b)
}

// plainMail is a text/plain mail.
func plainMail(from, to, subject, msgID, headers, text string) string {
	return fmt.Sprintf("From: %s\nTo: %s\nSubject: %s\nMessage-ID: %s\nDate: %s\n%sMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n%s\n",
		from, to, subject, msgID, time.Now().Format(time.RFC1123Z), headers, text)
}

// agentFile is a file part as the agent received it.
type agentFile struct {
	Name, MediaType, URI string
	Bytes                []byte
}

// agentTurn is one new message the agent was sent (SendMessage, or
// message/send in 0.3), as it arrived.
type agentTurn struct {
	MessageID, ContextID, TaskID string
	Text                         string
	Files                        []agentFile
	Metadata                     map[string]any
	At                           time.Time
}

// agentRecorder sits in front of a real A2A agent (either generation):
// it forwards every request, notes each message sent and when a task was
// first seen completed, and rewrites the agent card so that the daemon
// keeps talking through it.
type agentRecorder struct {
	URL      string // the a2a_url to configure
	upstream *url.URL
	srv      *httptest.Server

	mu       sync.Mutex
	turns    []agentTurn
	taskMsg  map[string]string    // task id → message id that started it
	answered map[string]time.Time // message id → when its task was first seen completed
}

// startAgentRecorder fronts the agent whose a2a_url is agentURL.
func startAgentRecorder(t *testing.T, agentURL string) *agentRecorder {
	t.Helper()
	up, err := url.Parse(agentURL)
	if err != nil {
		t.Fatal(err)
	}
	r := &agentRecorder{upstream: up, taskMsg: map[string]string{}, answered: map[string]time.Time{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	r.URL = r.srv.URL + up.Path
	return r
}

func (r *agentRecorder) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var call struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	var sent *agentTurn
	if req.Method == http.MethodPost && json.Unmarshal(body, &call) == nil {
		if call.Method == "SendMessage" || call.Method == "message/send" {
			sent = decodeSentMessage(call.Params)
			if sent != nil {
				r.mu.Lock()
				r.turns = append(r.turns, *sent)
				r.mu.Unlock()
			}
		}
	}
	origin := r.upstream.Scheme + "://" + r.upstream.Host
	out, err := http.NewRequestWithContext(req.Context(), req.Method, origin+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = req.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if strings.Contains(req.URL.Path, "agent-card") || strings.Contains(req.URL.Path, "agent.json") {
		rb = bytes.ReplaceAll(rb, []byte(origin), []byte(r.srv.URL))
	}
	r.noteAnswer(call.Method, rb, sent)
	for k, v := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(rb)
}

// noteAnswer records when a task started by a recorded message is first
// seen completed (in the send's result or a later get).
func (r *agentRecorder) noteAnswer(method string, body []byte, sent *agentTurn) {
	var res struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(body, &res) != nil || len(res.Result) == 0 {
		return
	}
	var task *agent.Task
	switch method {
	case "SendMessage":
		_, task, _ = agent.DecodeSendResult(res.Result)
	case "message/send":
		_, task, _ = agent.DecodeSendResult03(res.Result)
	case "GetTask":
		task, _ = agent.DecodeTask(res.Result)
	case "tasks/get":
		task, _ = agent.DecodeTask03(res.Result)
	}
	if task == nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if sent != nil {
		r.taskMsg[task.ID] = sent.MessageID
	}
	if task.Status.State != agent.StateCompleted {
		return
	}
	if mid, ok := r.taskMsg[task.ID]; ok {
		if _, seen := r.answered[mid]; !seen {
			r.answered[mid] = now
		}
	}
}

// decodeSentMessage reads params.message of either generation.
func decodeSentMessage(params json.RawMessage) *agentTurn {
	var p struct {
		Message struct {
			MessageID string         `json:"messageId"`
			ContextID string         `json:"contextId"`
			TaskID    string         `json:"taskId"`
			Metadata  map[string]any `json:"metadata"`
			Parts     []struct {
				Kind      string  `json:"kind"`
				Text      *string `json:"text"`
				Raw       *string `json:"raw"`
				URL       *string `json:"url"`
				Filename  string  `json:"filename"`
				MediaType string  `json:"mediaType"`
				File      *struct {
					Name     string  `json:"name"`
					MimeType string  `json:"mimeType"`
					Bytes    *string `json:"bytes"`
					URI      *string `json:"uri"`
				} `json:"file"`
			} `json:"parts"`
		} `json:"message"`
	}
	if json.Unmarshal(params, &p) != nil || p.Message.MessageID == "" {
		return nil
	}
	m := p.Message
	out := &agentTurn{MessageID: m.MessageID, ContextID: m.ContextID, TaskID: m.TaskID, Metadata: m.Metadata, At: time.Now()}
	for _, part := range m.Parts {
		switch {
		case part.Text != nil:
			out.Text += *part.Text
		case part.File != nil: // 0.3
			f := agentFile{Name: part.File.Name, MediaType: part.File.MimeType}
			if part.File.Bytes != nil {
				f.Bytes, _ = base64.StdEncoding.DecodeString(*part.File.Bytes)
			}
			if part.File.URI != nil {
				f.URI = *part.File.URI
			}
			out.Files = append(out.Files, f)
		case part.Raw != nil || part.URL != nil: // 1.0
			f := agentFile{Name: part.Filename, MediaType: part.MediaType}
			if part.Raw != nil {
				f.Bytes, _ = base64.StdEncoding.DecodeString(*part.Raw)
			}
			if part.URL != nil {
				f.URI = *part.URL
			}
			out.Files = append(out.Files, f)
		}
	}
	return out
}

// Turns returns the recorded new messages (conversation turns: no task
// id) whose text contains marker.
func (r *agentRecorder) Turns(marker string) []agentTurn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []agentTurn
	for _, m := range r.turns {
		if m.TaskID == "" && strings.Contains(m.Text, marker) {
			out = append(out, m)
		}
	}
	return out
}

// All returns every recorded message.
func (r *agentRecorder) All() []agentTurn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]agentTurn(nil), r.turns...)
}

// Answered is when the task of message id was first seen completed.
func (r *agentRecorder) Answered(messageID string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.answered[messageID]
	return at, ok
}

// distinctMessages is the number of distinct A2A messageIds among turns.
func distinctMessages(turns []agentTurn) int {
	ids := map[string]bool{}
	for _, t := range turns {
		ids[t.MessageID] = true
	}
	return len(ids)
}

// twilioSent is one Messages API create as the recorder saw it.
type twilioSent struct {
	From, To, Body string
	Status         int
	At             time.Time
}

// twilioRecorder records the Messages API creates on their way to a
// Twilio peer (Prism serving Twilio's OpenAPI description, which refuses
// a request that breaks it, or twiliotest) and passes the peer's answer
// back.
type twilioRecorder struct {
	URL      string
	upstream string
	mu       sync.Mutex
	sent     []twilioSent
}

func startTwilioRecorder(t *testing.T, upstream string) *twilioRecorder {
	t.Helper()
	r := &twilioRecorder{upstream: upstream}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, _ := http.NewRequestWithContext(req.Context(), req.Method, r.upstream+req.URL.RequestURI(), bytes.NewReader(body))
		out.Header = req.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		rb, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/Messages.json") {
			form, _ := url.ParseQuery(string(body))
			r.mu.Lock()
			r.sent = append(r.sent, twilioSent{From: form.Get("From"), To: form.Get("To"), Body: form.Get("Body"), Status: resp.StatusCode, At: time.Now()})
			r.mu.Unlock()
		}
		for k, v := range resp.Header {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(rb)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Sent returns the creates accepted (2xx) whose body contains marker.
func (r *twilioRecorder) Sent(marker string) []twilioSent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []twilioSent
	for _, s := range r.sent {
		if s.Status/100 == 2 && strings.Contains(s.Body, marker) {
			out = append(out, s)
		}
	}
	return out
}

// Refused returns the creates the peer refused.
func (r *twilioRecorder) Refused() []twilioSent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []twilioSent
	for _, s := range r.sent {
		if s.Status/100 != 2 {
			out = append(out, s)
		}
	}
	return out
}

// postTwilio posts a signed inbound-message webhook as Twilio does and
// returns the status (0 when the daemon did not answer).
func postTwilio(hc *http.Client, base, publicURL, token string, form url.Values) (int, string) {
	hook := publicURL + twilioInboundPath
	req, _ := http.NewRequest("POST", base+twilioInboundPath, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", twilio.Signature(token, hook, form))
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b)
}

// smsForm is Twilio's inbound-message form.
func smsForm(sid, from, to, body string) url.Values {
	return url.Values{"AccountSid": {fakeTwilioAccount}, "MessageSid": {sid}, "SmsMessageSid": {sid},
		"From": {from}, "To": {to}, "Body": {body}, "NumMedia": {"0"}, "NumSegments": {"1"}, "ApiVersion": {"2010-04-01"}}
}

// getJSON GETs an API path with the test key and decodes the answer.
func getJSON(base, path string, out any) (int, error) {
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s: %w: %s", path, err, b)
		}
	}
	return resp.StatusCode, nil
}

// convDaemon is the built daemon configured for conversations: agent
// "travel" answers mail to travel@beachd.test (read from the Dovecot
// mailbox) and SMS to +15550001111 (the signed Twilio webhook); answers
// go out by SMTP and through the Twilio API at twilioURL.
type convDaemon struct {
	*daemon
	dir, dataDir, publicURL string
}

const (
	convAgentEmail = "travel@beachd.test"
	convAgentSMS   = "+15550001111"
)

func startConvDaemon(t *testing.T, agentURL string, mp *mailPeer, smtpPort int, twilioURL string, extra string) *convDaemon {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	cd := &convDaemon{dir: dir, dataDir: filepath.Join(dir, "data"), publicURL: "http://" + addr}
	cfg := fmt.Sprintf(`listen: %[1]s
data_dir: %[2]s
public_url: http://%[1]s
api_keys: ["%[3]s"]
log: {level: warn}
dispatch: {workers: 8}
agents:
  travel:
    a2a_url: "%[4]s"
    timeout: 10s
    inbound:
      email: ["%[5]s"]
      sms: ["%[6]s"]
      allow: ["*@people.test", "+4477*"]
      max_turns: {per_minute: 1000, per_hour: 60000}
email:
  from: "Beach Travel <%[5]s>"
  reply_domain: beachd.test
  trust_unauthenticated: true
  smtp: {host: 127.0.0.1, port: %[7]d, tls: none, pool_size: 4, timeout: 5s}
  imap: %[8]s
twilio:
  account_sid: "%[9]s"
  auth_token: "%[10]s"
  api_base_url: "%[11]s"
  sms_from: "%[6]s"
  rate_per_second: 1000
  burst: 1000
  timeout: 5s
%[12]s`, addr, cd.dataDir, e2eKey, agentURL, convAgentEmail, convAgentSMS, smtpPort, mp.yaml(),
		fakeTwilioAccount, fakeTwilioToken, twilioURL, extra)
	cfgPath := filepath.Join(dir, "beachd.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cd.daemon = &daemon{t: t, bin: bin, cfg: cfgPath, base: "http://" + addr}
	return cd
}

// diagnose describes what the daemon and the agent hold, for a failure.
func (cd *convDaemon) diagnose(rec *agentRecorder) string {
	var b strings.Builder
	for _, path := range []string{"/v1/conversations", "/v1/inbound?limit=50", "/v1/deliveries?limit=50"} {
		var v json.RawMessage
		code, err := getJSON(cd.base, path, &v)
		fmt.Fprintf(&b, "GET %s: %d %v\n%s\n", path, code, err, v)
	}
	for _, m := range rec.All() {
		at, ok := rec.Answered(m.MessageID)
		fmt.Fprintf(&b, "agent got %s context %s task %q text %q; answered %v %s\n", m.MessageID, m.ContextID, m.TaskID, m.Text, ok, at.Format(time.StampMilli))
	}
	return b.String()
}

// inboundFor lists the inbound records whose text holds one of markers
// ("channel marker" as the crash loop names them).
func (cd *convDaemon) inboundFor(markers []string) string {
	var b strings.Builder
	after := ""
	for page := 0; page < 100; page++ {
		var v struct {
			Inbound []map[string]any `json:"inbound"`
			Next    string           `json:"next"`
		}
		path := "/v1/inbound?limit=1000"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		if code, err := getJSON(cd.base, path, &v); code != 200 || err != nil {
			fmt.Fprintf(&b, "GET %s: %d %v\n", path, code, err)
			return b.String()
		}
		for _, rec := range v.Inbound {
			text, _ := rec["text"].(string)
			for _, m := range markers {
				if f := strings.Fields(m); len(f) > 1 && strings.Contains(text, f[1]) {
					line, _ := json.Marshal(rec)
					fmt.Fprintf(&b, "%s\n", line)
				}
			}
		}
		if after = v.Next; after == "" {
			break
		}
	}
	return b.String()
}

// sms posts a signed inbound SMS and returns the webhook's status.
func (cd *convDaemon) sms(hc *http.Client, sid, from, body string) (int, string) {
	return postTwilio(hc, cd.base, cd.publicURL, fakeTwilioToken, smsForm(sid, from, convAgentSMS, body))
}

// mailText is the decoded text of every text part of a mail.
func mailText(m *mail.Message) string {
	var b strings.Builder
	var walk func(h textproto.MIMEHeader, body io.Reader)
	walk = func(h textproto.MIMEHeader, body io.Reader) {
		mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
		if err != nil {
			mt = "text/plain"
		}
		if strings.HasPrefix(mt, "multipart/") {
			mr := multipart.NewReader(body, params["boundary"])
			for {
				p, err := mr.NextRawPart()
				if err != nil {
					return
				}
				walk(p.Header, p)
			}
		}
		if !strings.HasPrefix(mt, "text/") {
			return
		}
		switch strings.ToLower(h.Get("Content-Transfer-Encoding")) {
		case "quoted-printable":
			body = quotedprintable.NewReader(body)
		case "base64":
			body = base64.NewDecoder(base64.StdEncoding, body)
		}
		data, _ := io.ReadAll(io.LimitReader(body, 1<<20))
		b.Write(data)
		b.WriteString("\n")
	}
	walk(textproto.MIMEHeader(m.Header), m.Body)
	return b.String()
}

// sentMail is one mail at the SMTP sink, parsed.
type sentMail struct {
	Header mail.Header
	Text   string
	To     []string
	At     time.Time
}

// mailsTo returns the mails at the sink for rcpt whose text contains marker.
func mailsTo(sink *smtptest.Server, rcpt, marker string) []sentMail {
	var out []sentMail
	for _, m := range sink.Messages() {
		if !slices.Contains(m.To, rcpt) || !bytes.Contains(m.Raw, []byte(marker)) && !strings.Contains(string(m.Raw), "base64") {
			continue
		}
		pm, err := mail.ReadMessage(bytes.NewReader(m.Raw))
		if err != nil {
			continue
		}
		text := mailText(pm)
		if strings.Contains(text, marker) {
			out = append(out, sentMail{Header: pm.Header, Text: text, To: m.To, At: m.At})
		}
	}
	return out
}

var signedReplyRe = regexp.MustCompile(`^travel\+c-(cnv_[A-Za-z0-9_-]+)\.([a-z2-7]+)@beachd\.test$`)

// TestConversationsEndToEnd runs the built daemon against real peers — a
// Dovecot mailbox its IMAP intake reads, an SMTP sink, Prism serving
// Twilio's OpenAPI description, and an A2A agent of each generation (the
// a2a-go 0.3 agent and the JS SDK 1.x agent) — and walks a conversation
// through: a mail to the agent's address becomes one turn (contextId the
// conversation id, the text and the attachment as parts, metadata.beach);
// the answer goes out threaded under the person's mail with a signed
// Reply-To; a second mail to that Reply-To without any threading headers
// continues the conversation; an SMS through the signed webhook starts
// another, answered from the agent's number; a webhook retried five times
// is one turn; senders off the allow list start nothing; and
// GET /v1/conversations/{id} shows the messages both ways.
func TestConversationsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon with its peers")
	}
	prism := twiliotest.StartPrism(t, "conversation tests' Twilio peer", twiliotest.SpecMessages)
	js := a2ajstest.Start(t, a2ajstest.Options{})
	ag := agenttest.StartOn(nil, true)
	t.Cleanup(ag.Close)
	for _, p := range []struct{ gen, url string }{{agent.V03, ag.URL}, {agent.V10, js.JSONRPC}} {
		t.Run("a2a-"+p.gen, func(t *testing.T) { conversationsEndToEnd(t, p.gen, p.url, prism) })
	}
}

func conversationsEndToEnd(t *testing.T, gen, agentURL, prism string) {
	rec := startAgentRecorder(t, agentURL)
	mp := startMailPeer(t)
	sink := &smtptest.Server{Keep: true}
	smtpPort, _ := smtptest.Start(t, sink, smtptest.Plain)
	tw := startTwilioRecorder(t, prism)
	cd := startConvDaemon(t, rec.URL, mp, smtpPort, tw.URL, "")
	cd.start()
	defer cd.stop()
	hc := &http.Client{Timeout: 10 * time.Second}
	imapc := mp.login()
	defer imapc.Close()
	tag := strings.ReplaceAll(gen, ".", "")
	const person = "ann@people.test"
	wait := func(d time.Duration, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %s waiting for %s\n%s\n%s", d, what, cd.diagnose(rec), cd.stderr)
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
	oneTurn := func(marker string) agentTurn {
		t.Helper()
		wait(30*time.Second, "the turn "+marker+" at the agent", func() bool { return len(rec.Turns(marker)) > 0 })
		if n := distinctMessages(rec.Turns(marker)); n != 1 {
			t.Fatalf("%s: %d turns (distinct messageIds) at the agent, want 1: %+v", marker, n, rec.Turns(marker))
		}
		return rec.Turns(marker)[0]
	}

	// Senders off the allow list go first: by the end nothing of theirs
	// may have reached the agent.
	mallory := "mk" + tag + "x1"
	mp.deliver(imapc, plainMail("Mallory <mallory@elsewhere.test>", convAgentEmail, "Hello", "<mallory-1-"+tag+"@elsewhere.test>", "", "Book me a flight "+mallory))
	stranger := "mk" + tag + "x2"
	if code, body := cd.sms(hc, "SM"+tag+"000000000000000000000000000000x2", "+15559990000", "Hello "+stranger); code/100 != 2 {
		t.Fatalf("webhook from a stranger: %d %s", code, body)
	}

	// 1. A new mail with an attachment starts a conversation.
	k1 := "mk" + tag + "a1"
	pdf := []byte("%PDF-1.4\n% itinerary " + k1 + "\n%%EOF\n")
	m1 := "<m1-" + tag + "@people.test>"
	mp.deliver(imapc, mailWithAttachment("Ann <"+person+">", "Beach Travel <"+convAgentEmail+">", "Flights to Lisbon", m1, "",
		"Flights to Lisbon for two, please. "+k1, "itinerary.pdf", "application/pdf", pdf))
	t1 := oneTurn(k1)
	if !strings.HasPrefix(t1.ContextID, "cnv_") {
		t.Errorf("turn contextId %q, want the conversation id (cnv_…)", t1.ContextID)
	}
	if !strings.Contains(t1.Text, "Flights to Lisbon for two, please.") {
		t.Errorf("turn text %q lacks the mail's text", t1.Text)
	}
	if len(t1.Files) != 1 || t1.Files[0].Name != "itinerary.pdf" || t1.Files[0].MediaType != "application/pdf" ||
		!bytes.Equal(t1.Files[0].Bytes, pdf) {
		t.Errorf("turn file parts %+v, want itinerary.pdf (application/pdf) inline with the mail's bytes", t1.Files)
	}
	beach, _ := t1.Metadata["beach"].(map[string]any)
	if len(beach) == 0 {
		t.Errorf("turn metadata %v has no beach object", t1.Metadata)
	} else {
		b, _ := json.Marshal(beach)
		if !bytes.Contains(b, []byte(t1.ContextID)) || !bytes.Contains(b, []byte("email")) || !bytes.Contains(b, []byte(person)) {
			t.Errorf("metadata.beach %s does not name the conversation %s, the channel and the sender", b, t1.ContextID)
		}
		t.Logf("metadata.beach: %s", b)
	}
	cnv := t1.ContextID

	// The answer goes out by SMTP, threaded under the person's mail.
	var a1 sentMail
	wait(30*time.Second, "the answer to "+k1+" at the SMTP sink", func() bool {
		ms := mailsTo(sink, person, k1)
		if len(ms) > 0 {
			a1 = ms[0]
		}
		return len(ms) > 0
	})
	subj, _ := new(mime.WordDecoder).DecodeHeader(a1.Header.Get("Subject"))
	if subj != "Re: Flights to Lisbon" {
		t.Errorf("answer Subject %q, want %q", subj, "Re: Flights to Lisbon")
	}
	if got := a1.Header.Get("In-Reply-To"); got != m1 {
		t.Errorf("answer In-Reply-To %q, want the person's %q", got, m1)
	}
	if got := a1.Header.Get("References"); !strings.Contains(got, m1) {
		t.Errorf("answer References %q lack %q", got, m1)
	}
	if got := a1.Header.Get("Auto-Submitted"); got != "auto-replied" {
		t.Errorf("answer Auto-Submitted %q, want auto-replied", got)
	}
	if from, err := mail.ParseAddress(a1.Header.Get("From")); err != nil || from.Address != convAgentEmail {
		t.Errorf("answer From %q, want the address the person wrote to (%s)", a1.Header.Get("From"), convAgentEmail)
	}
	rt, err := mail.ParseAddress(a1.Header.Get("Reply-To"))
	if err != nil {
		t.Fatalf("answer Reply-To %q: %v", a1.Header.Get("Reply-To"), err)
	}
	sm := signedReplyRe.FindStringSubmatch(rt.Address)
	if sm == nil || sm[1] != cnv {
		t.Fatalf("answer Reply-To %q is not the signed reply address of %s", rt.Address, cnv)
	}
	if !strings.Contains(a1.Text, k1) {
		t.Errorf("answer text %q lacks the agent's answer", a1.Text)
	}
	if !strings.Contains(a1.Text, "Reply to this message to go on with the conversation.") || strings.Contains(a1.Text, "only to answer approval requests") {
		t.Errorf("answer text %q does not say that a reply goes on with the conversation", a1.Text)
	}

	// 2. A client that drops In-Reply-To and References but writes to the
	// signed Reply-To stays in the conversation; a forged MAC does not.
	k2 := "mk" + tag + "a2"
	m2 := "<m2-" + tag + "@people.test>"
	mp.deliver(imapc, plainMail("Ann <"+person+">", rt.Address, "Another question", m2, "", "And a hotel near the river? "+k2))
	t2 := oneTurn(k2)
	if t2.ContextID != cnv {
		t.Errorf("second mail: contextId %q, want the conversation %s", t2.ContextID, cnv)
	}
	if t2.MessageID == t1.MessageID {
		t.Errorf("second mail reused messageId %s", t1.MessageID)
	}
	var a2 sentMail
	wait(30*time.Second, "the answer to "+k2, func() bool {
		ms := mailsTo(sink, person, k2)
		if len(ms) > 0 {
			a2 = ms[0]
		}
		return len(ms) > 0
	})
	if got := a2.Header.Get("In-Reply-To"); got != m2 {
		t.Errorf("second answer In-Reply-To %q, want %q", got, m2)
	}
	if got := a2.Header.Get("References"); !strings.Contains(got, m1) || !strings.Contains(got, m2) {
		t.Errorf("second answer References %q, want the chain %s %s", got, m1, m2)
	}
	badMAC := "a" + sm[2][1:]
	if badMAC == sm[2] {
		badMAC = "b" + sm[2][1:]
	}
	forged := strings.Replace(rt.Address, "."+sm[2]+"@", "."+badMAC+"@", 1)
	k2f := "mk" + tag + "a2f"
	mp.deliver(imapc, plainMail("Ann <"+person+">", forged, "Forged", "<m2f-"+tag+"@people.test>", "", "Forged thread "+k2f))

	// 3. An SMS through the signed webhook starts a conversation; the
	// answer goes out through Twilio from the agent's number.
	const phone = "+447700900111"
	k3 := "mk" + tag + "s1"
	if code, body := cd.sms(hc, "SM"+tag+"000000000000000000000000000000s1", phone, "Table for two tonight? "+k3); code/100 != 2 {
		t.Fatalf("webhook: %d %s", code, body)
	}
	t3 := oneTurn(k3)
	if !strings.HasPrefix(t3.ContextID, "cnv_") || t3.ContextID == cnv {
		t.Errorf("SMS turn contextId %q, want a new conversation", t3.ContextID)
	}
	if beach, _ := t3.Metadata["beach"].(map[string]any); len(beach) == 0 {
		t.Errorf("SMS turn metadata %v has no beach object", t3.Metadata)
	}
	wait(30*time.Second, "the SMS answer at Twilio", func() bool { return len(tw.Sent(k3)) > 0 })
	if s := tw.Sent(k3)[0]; s.From != convAgentSMS || s.To != phone {
		t.Errorf("SMS answer from %q to %q, want from %s to %s", s.From, s.To, convAgentSMS, phone)
	}

	// 4. Twilio retries a webhook (same MessageSid) five times: one turn,
	// in the same SMS conversation.
	k4 := "mk" + tag + "s2"
	for i := 0; i < 5; i++ {
		if code, body := cd.sms(hc, "SM"+tag+"000000000000000000000000000000s2", phone, "Make it three "+k4); code/100 != 2 {
			t.Fatalf("retried webhook %d: %d %s", i, code, body)
		}
	}
	t4 := oneTurn(k4)
	if t4.ContextID != t3.ContextID {
		t.Errorf("second SMS contextId %q, want the open SMS conversation %s", t4.ContextID, t3.ContextID)
	}
	wait(30*time.Second, "the answer to the retried SMS", func() bool { return len(tw.Sent(k4)) > 0 })
	time.Sleep(time.Second) // a second turn or answer for a retry would show by now
	if n := len(rec.Turns(k4)); n != 1 {
		t.Errorf("five deliveries of one webhook made %d requests to the agent", n)
	}
	if n := len(tw.Sent(k4)); n != 1 {
		t.Errorf("five deliveries of one webhook made %d answers", n)
	}

	// 5. Nothing from the senders off the allow list, nor by the forged
	// reply address, started a turn.
	wait(30*time.Second, "the intake to process every mail", func() bool { return mp.count(imapc, "INBOX") == 0 })
	time.Sleep(time.Second)
	for _, m := range []string{mallory, stranger} {
		if got := rec.Turns(m); len(got) != 0 {
			t.Errorf("a sender off the allow list reached the agent: %+v", got)
		}
	}
	for _, turn := range rec.Turns(k2f) {
		if turn.ContextID == cnv {
			t.Errorf("a reply address with a forged MAC continued conversation %s", cnv)
		}
	}
	// refuse_unknown is on by default: one polite refusal each, which
	// carries nothing of the agent.
	toMallory, toStranger := 0, 0
	for _, m := range sink.Messages() {
		if slices.Contains(m.To, "mallory@elsewhere.test") {
			toMallory++
		}
	}
	for _, s := range tw.Sent("") {
		if s.To == "+15559990000" {
			toStranger++
		}
	}
	if toMallory != 1 || toStranger != 1 {
		t.Errorf("refusals: %d mails to the unknown sender, %d SMS to the unknown number; want one each", toMallory, toStranger)
	}
	var rejected json.RawMessage
	if code, err := getJSON(cd.base, "/v1/inbound?disposition=rejected", &rejected); code != 200 || err != nil {
		t.Errorf("GET /v1/inbound?disposition=rejected: %d %v", code, err)
	} else if !bytes.Contains(rejected, []byte("mallory@elsewhere.test")) || !bytes.Contains(rejected, []byte("+15559990000")) {
		t.Errorf("the rejected senders are not listed as rejected inbound: %s", rejected)
	}
	if r := tw.Refused(); len(r) != 0 {
		t.Errorf("Twilio's description refused %d of our requests: %+v", len(r), r)
	}

	// 6. The API shows the email conversation both ways.
	var detail map[string]any
	if code, err := getJSON(cd.base, "/v1/conversations/"+cnv, &detail); code != 200 || err != nil {
		t.Fatalf("GET /v1/conversations/%s: %d %v", cnv, code, err)
	}
	in, out := map[string]bool{}, map[string]bool{}
	msgs, _ := field(detail, "messages").([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		dir, _ := field(mm, "direction").(string)
		text, _ := field(mm, "text").(string)
		for _, k := range []string{k1, k2} {
			if strings.Contains(text, k) {
				switch dir {
				case "in":
					in[k] = true
				case "out":
					out[k] = true
				}
			}
		}
	}
	if len(in) != 2 || len(out) != 2 {
		b, _ := json.MarshalIndent(detail, "", "  ")
		t.Errorf("GET /v1/conversations/%s shows inbound %v and outbound %v of %s and %s:\n%s", cnv, in, out, k1, k2, b)
	}
	t.Logf("%s: turns %d, mails answered %d, SMS answered %d", gen, len(rec.All()), len(sink.Messages()), len(tw.Sent("")))
}

// field reads key from m, ignoring case.
func field(m map[string]any, key string) any {
	for k, v := range m {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return nil
}
