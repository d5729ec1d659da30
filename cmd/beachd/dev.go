package main

import (
	"cmp"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cool-ai/beachd/agent"
	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/api/mcp"
	"github.com/cool-ai/beachd/channels/email"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
)

// DevCmd runs beachd on an embedded default: a data dir under the working
// directory, a generated API key, a local webhook sink, a local mail server
// (SMTP + IMAP) and recorded SMS/WhatsApp, so a newcomer can send an
// envelope and answer an approval with nothing else installed.
type DevCmd struct {
	Listen  string `default:"127.0.0.1:8025" help:"Address of the HTTP API."`
	DataDir string `name:"data-dir" default:"beachd-dev-data" help:"Data directory (created if missing)." type:"path"`
	// AgentA2A is the A2A generation the dev agent speaks.
	AgentA2A string `name:"agent-a2a" default:"1.0" enum:"1.0,0.3" help:"A2A generation of the dev agent: 1.0 or 0.3 (beachd picks it from the agent's card either way)."`
}

// The dev agent's inbound address and number: mail to devAgentEmail (the
// dev mail server's agent mailbox, which the intake reads) and SMS or
// WhatsApp to devAgentNumber (what POST /dev/reply writes to by default)
// start and continue conversations with the dev agent.
const (
	devAgentEmail  = "agent@" + email.DevDomain
	devAgentNumber = "+15550001111"
)

// devSinkEndpoint is the webhook endpoint `beachd dev` delivers to: its own
// sink at /dev/sink.
const devSinkEndpoint = "dev-sink"

// Run starts the dev daemon.
func (c *DevCmd) Run(g *globals) error {
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	key := g.getenv("BEACHD_API_KEY")
	if key == "" {
		var err error
		if key, err = persistentSecret(filepath.Join(c.DataDir, "dev-api-key"), func() string { return "bd_" + randomToken(24) }); err != nil {
			return err
		}
	}
	sinkSecret, err := persistentSecret(filepath.Join(c.DataDir, "dev-sink-secret"), func() string {
		b := make([]byte, 24)
		rand.Read(b)
		return "whsec_" + base64.StdEncoding.EncodeToString(b)
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another beachd running? pass --listen 127.0.0.1:0)", c.Listen, err)
	}
	addr := ln.Addr().String()
	cfg := devConfig(addr, c.DataDir, key, sinkSecret)
	cfg.DevAgentA2A = c.AgentA2A
	return serve(g, cfg, true, ln)
}

// devConfig is the embedded default configuration of `beachd dev`.
func devConfig(addr, dataDir, apiKey, sinkSecret string) *config.Config {
	cfg := &config.Config{
		Listen:    addr,
		DataDir:   dataDir,
		PublicURL: "http://" + addr,
		APIKeys:   []config.APIKey{{Key: apiKey}},
		Log:       config.LogConfig{Format: "text", Level: "info"},
		Agents:    map[string]config.AgentConfig{devAgentName: config.DevAgent(addr, devAgentEmail, devAgentNumber)},
		Webhooks: config.WebhooksConfig{Endpoints: map[string]config.EndpointConfig{
			devSinkEndpoint: config.DevSink(addr, sinkSecret),
		}},
		Schedules: []config.ScheduleConfig{config.DevSchedule(devAgentName, devSinkEndpoint, "you@"+email.DevDomain)},
		// A booking of at most £200 by the dev agent is granted at once,
		// nobody asked (the README's tour sends one); others are asked.
		Approvals: config.ApprovalsConfig{Policies: []config.PolicyConfig{{Name: "small-bookings",
			Match: config.PolicyMatch{Agent: devAgentName, Tool: "book_flight",
				When: "double(args.totalPrice.amount) <= 200.0 && args.totalPrice.currency == 'GBP'"},
			Decide: envelope.DecisionGranted}}},
	}
	cfg.FillDefaults()
	return cfg
}

// persistentSecret reads a secret from path, creating it with gen when the
// file does not exist, so that `beachd dev` keeps its key across restarts.
func persistentSecret(path string, gen func() string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	s := gen()
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return s, nil
}

func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

func printDevBanner(w io.Writer, a *app, addr string) {
	base := "http://" + addr
	key := a.cfg.APIKeys[0].Key
	fmt.Fprintf(w, `
beachd dev is running.

  API          %[1]s   (API key: %[2]s)
  data         %[3]s
  webhook sink %[1]s/dev/sink   (endpoint %[4]q; GET it to see what arrived)
  dev agent    %[1]s/dev/agent/  (agent %[5]q, A2A %[6]s; GET %[1]s/dev/agent/received lists injected decisions)
`, base, key, a.cfg.DataDir, devSinkEndpoint, devAgentName, devGeneration(a.cfg.DevAgentA2A))
	for _, line := range a.banner {
		fmt.Fprintln(w, "  "+line)
	}
	fmt.Fprintf(w, `
Send the sample envelope:

  curl -sS -H 'Authorization: Bearer %[2]s' -H 'Content-Type: application/json' \
       --data @testdata/dev-request.json %[1]s/v1/deliveries

then see where it went:

  curl -sS %[1]s/dev/sink
  BEACHD_API_KEY=%[2]s go run ./cmd/beachd deliveries list --url %[1]s

Talk to the dev agent (it quotes your text, names your attachments and counts the turns):

  by mail  write from %[4]s to %[3]s with any mail client (the mail server above), or with curl:
%[5]s
           the answer comes back to %[4]s (the console's Dev inbox shows it, under Mail: %[1]s/ui/dev)
  by SMS   curl -sS -H 'Content-Type: application/json' %[1]s/dev/reply \
                -d '{"channel":"sms","from":"+447700900123","text":"Flights to Lisbon?"}'
           then: curl -sS %[1]s/dev/messages   (whatsapp works alike; "media":[{"mediaType","filename","data"(base64)}] attaches files)

`, base, key, devAgentEmail, "you@"+email.DevDomain, devMailCommand(a.console.mail))
	if a.cfg.MCP.On() {
		fmt.Fprintf(w, `Give an AI agent beachd's tools (send_message, ask_for_approval, get_approval, conversations; docs/mcp.md):
paste this MCP client configuration (Claude Code's .mcp.json, Cursor's mcp.json, …):

  %[1]s

or with Claude Code:  claude mcp add --transport http beachd %[2]s --header 'Authorization: Bearer %[3]s'

`, devMCPConfig(base+mcp.Path, key), base+mcp.Path, key)
	}
}

// devMCPConfig is an MCP client configuration naming beachd's MCP server
// at url with the API key, on one line.
func devMCPConfig(url, key string) string {
	type server struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]server{"beachd": {Type: "http", URL: url,
		Headers: map[string]string{"Authorization": "Bearer " + key}}}})
	return string(b)
}

// devMailCommand is a curl command that writes to the dev agent through the
// dev mail server, ready to paste.
func devMailCommand(d *email.DevServer) string {
	if d == nil {
		return "           (no local mail server: the email channel is configured)"
	}
	return fmt.Sprintf(`           printf 'From: %[1]s\r\nTo: %[2]s\r\nSubject: Flights to Lisbon\r\n\r\nAny flights on Friday?\r\n' |
             curl -sS smtp://%[3]s --mail-from %[1]s --mail-rcpt %[2]s --user '%[1]s:%[4]s' -T -`,
		d.You.Address, devAgentEmail, d.SMTPAddr(), d.You.Password)
}

// devGeneration is the A2A generation the dev agent speaks for the
// --agent-a2a value v.
func devGeneration(v string) string {
	if v == agent.V03 {
		return agent.V03
	}
	return agent.V10
}

// wireDev mounts what only `beachd dev` has: the webhook sink its dev-sink
// endpoint delivers to, and the dev agent decisions are injected into.
func (a *app) wireDev() error {
	if !a.dev {
		return nil
	}
	ep, ok := a.cfg.Webhooks.Endpoints[devSinkEndpoint]
	if !ok {
		return nil
	}
	secrets, err := webhook.ParseSecrets(ep.SecretList())
	if err != nil {
		return fmt.Errorf("dev sink secret: %w", err)
	}
	sink := webhook.NewSink(webhook.SinkConfig{Secrets: secrets, Keep: 200})
	a.console.sink = sink
	a.routes = append(a.routes,
		api.Route{Method: "POST", Pattern: "/dev/sink", Handler: sink},
		api.Route{Method: "GET", Pattern: "/dev/sink", Handler: devSinkView(sink)})
	a.devAgent = &devAgent{now: time.Now, generation: devGeneration(a.cfg.DevAgentA2A), fetch: &http.Client{Timeout: 10 * time.Second}, fetchBase: a.cfg.PublicURL}
	open := a.listener != nil && isLoopback(a.listener.Addr())
	for _, r := range a.devAgent.routes(a.cfg.PublicURL, a.log.With("component", "dev-agent")) {
		if r.Method == http.MethodPost {
			// Unsigned, without a key: no web page may post to it.
			r.Handler = devPostGuard(r.Handler, open, a.cfg.PublicURL)
		}
		a.routes = append(a.routes, r)
	}
	return nil
}

// devSinkView serves GET /dev/sink: what the sink received, as indented
// JSON a person reads in a terminal (one delivery after another, each
// envelope laid out), not one long line.
func devSinkView(sink *webhook.Sink) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			webhook.SinkStats
			Received []webhook.Received `json:"received"`
		}{sink.Stats(), sink.Received()})
	})
}

// devPostGuard lets through only the posts to `beachd dev`'s unsigned
// endpoints (/dev/reply, the dev agent) that no other web site can have
// made a browser send. Such an endpoint starts turns and answers
// approvals without a key, on loopback; without the guard any page the
// developer visits could post a form to it.
//
//   - A browser post must be same-origin: Sec-Fetch-Site same-origin (or
//     none, a request the user made), else an Origin whose host is the
//     Host (net/http's CrossOriginProtection). A post that a browser marks
//     (Sec-Fetch-*) but sends without an Origin is refused too: browsers
//     send one on every POST.
//   - A client that is not a browser (curl, a test, beachd's own agent
//     client) sends neither Origin nor Sec-Fetch-Site and is let through:
//     no web page can make a browser send such a request, and the endpoint
//     is mounted without a key only on a loopback listener.
//   - When open (no key), the Host must name this machine — a loopback
//     address, localhost, or public_url's host — so that a page whose DNS
//     name is rebound to 127.0.0.1 cannot pass as same-origin.
//
// A refusal is 403 with a sentence saying why.
func devPostGuard(next http.Handler, open bool, publicURL string) http.Handler {
	cop := http.NewCrossOriginProtection()
	ownHost := ""
	if u, err := url.Parse(publicURL); err == nil {
		ownHost = strings.ToLower(u.Hostname())
	}
	refuse := func(w http.ResponseWriter, why string) {
		http.Error(w, "beachd dev: "+why+"; "+r403Hint, http.StatusForbidden)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open && !devLocalHost(r.Host, ownHost) {
			refuse(w, fmt.Sprintf("Host %q is not this machine's address (a page whose name points at 127.0.0.1 may not post here)", clip(r.Host, 100)))
			return
		}
		if err := cop.Check(r); err != nil {
			refuse(w, fmt.Sprintf("a cross-origin post from %q is refused", clip(cmp.Or(r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site")), 100)))
			return
		}
		if r.Header.Get("Origin") == "" && (r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Sec-Fetch-Mode") != "") {
			refuse(w, "a browser post without an Origin header is refused")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// r403Hint says what is accepted, after a refusal.
const r403Hint = "posts come from this beachd's own pages (the console's Dev inbox) or from a client that is not a browser (curl)"

// devLocalHost reports whether the Host header host names this machine:
// a loopback address, localhost (or a name under .localhost), or own, the
// host of public_url.
func devLocalHost(host, own string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.ToLower(strings.Trim(h, "[]"))
	if ip := net.ParseIP(h); ip != nil {
		return ip.IsLoopback() || (own != "" && h == own)
	}
	return h == "localhost" || strings.HasSuffix(h, ".localhost") || (own != "" && h == own)
}
