package render

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
)

var update = flag.Bool("update", false, "rewrite golden files")

const envelopesDir = "../testdata/envelopes"

// testToken is a valid email token: 26 characters of [a-z2-7].
const testToken = "k7n3q2m5x4p6r8t2v4w6y3z5ab"

var testNow = time.Date(2026, 4, 20, 9, 51, 0, 0, time.UTC)

// loadEnvelopes reads every sample envelope, checking that each is valid.
func loadEnvelopes(t testing.TB) map[string]*envelope.Envelope {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(envelopesDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample envelopes in %s: %v", envelopesDir, err)
	}
	reg := envelope.NewRegistry()
	out := map[string]*envelope.Envelope{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		env, err := envelope.Decode(b, envelope.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := reg.Validate(env); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = env
	}
	return out
}

func sortedNames(m map[string]*envelope.Envelope) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// testInput is the fixed input the golden files are rendered with: a
// recipient per channel, a handle for every approval, fetched artifacts (the
// PDF by URI fetched as bytes for email; signed links for the inline one).
func testInput(t testing.TB, name string, env *envelope.Envelope, channel string) Input {
	t.Helper()
	in := Input{
		Envelope:           env,
		Registry:           envelope.NewRegistry(),
		DeliveryID:         "dlv_01HZX4T8",
		Now:                testNow,
		From:               "Travel agent <agent@example.org>",
		ReplyTo:            "replies@reply.example.org",
		FullMessageURL:     "https://beachd.example.org/m/dlv_01HZX4T8",
		WhatsAppWindowOpen: true,
		Consumes:           []string{"domain-data", "llm-context"},
	}
	switch channel {
	case envelope.ChannelEmail:
		in.Recipient = Recipient{Channel: channel, Address: "alice@example.org", Name: "Alice Example"}
	case envelope.ChannelWebhook:
		in.Recipient = Recipient{Channel: channel, Address: "ops"}
	case envelope.ChannelSlack:
		in.Recipient = Recipient{Channel: channel, Address: "U012AB3CD"}
	default:
		in.Recipient = Recipient{Channel: channel, Address: "+447700900123"}
	}
	ars, err := env.ApprovalRequests()
	if err != nil {
		t.Fatal(err)
	}
	for _, ar := range ars {
		h := ApprovalHandle{ApprovalID: ar.ApprovalID, Request: ar, LinkURL: "https://beachd.example.org/a/Lk4mQ9vT2xW7pR3s"}
		switch channel {
		case envelope.ChannelEmail:
			h.Token = testToken
		case envelope.ChannelSMS:
			h.Code = "4821"
		case envelope.ChannelWhatsApp, envelope.ChannelSlack:
			h.Buttons = []Button{{Title: "Approve", Payload: ar.ApprovalID + ":n0nce7"}, {Title: "Deny", Payload: ar.ApprovalID + ":n0nce8"}}
		}
		if ar.ExpiresAt != nil {
			h.ExpiresAt = *ar.ExpiresAt
		}
		in.Approvals = append(in.Approvals, h)
	}
	for _, p := range env.PartsOf(envelope.PartArtifact) {
		var a envelope.Artifact
		if err := p.DecodeData(&a); err != nil {
			t.Fatal(err)
		}
		f := FetchedArtifact{ArtifactID: a.ArtifactID, MimeType: a.MimeType, Name: a.Name}
		if a.URI != "" {
			f.URL = a.URI
			if channel == envelope.ChannelEmail {
				f.Bytes = []byte("%PDF-1.4\n% test itinerary\n")
			}
		} else {
			f.URL = "https://beachd.example.org/f/Zq8Kx2Lm5Nb7Vc3R"
		}
		in.Artifacts = append(in.Artifacts, f)
	}
	if name == "clarification" {
		in.Thread = &Thread{InReplyTo: "<CAF=abc123@mail.example.com>", References: []string{"<root-1@mail.example.com>"}}
		in.Conversation = true
	}
	if name == "non-latin" {
		in.WhatsAppWindowOpen = false
		in.WhatsAppTemplate = &ContentTemplate{ContentSID: "HX0123456789abcdef0123456789abcdef",
			Variables: map[string]string{"1": "{{.Recipient.Name | default \"there\"}}", "2": "{{.DefaultSubject}}"}}
	}
	return in
}

func newTestRenderer(t testing.TB, cfg Config) *Renderer {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// golden compares got with testdata/golden/name, rewriting it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./render -run Golden -update)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (run with -update after checking):\n--- got ---\n%s", path, got)
	}
}
