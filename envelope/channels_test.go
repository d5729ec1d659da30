package envelope

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every spec is whole: a name, an address kind it can normalise, a class
// the delivery rules know, a retry profile, and handles a person or peer
// can answer with.
func TestChannelSpecsAreWhole(t *testing.T) {
	names := ChannelNames()
	if len(names) == 0 {
		t.Fatal("no channels")
	}
	seen := map[string]bool{}
	for _, s := range ChannelSpecs() {
		if s.Name == "" || seen[s.Name] {
			t.Errorf("spec %+v: empty or repeated name", s)
		}
		seen[s.Name] = true
		switch s.Address {
		case AddressEmail, AddressNumber, AddressEndpoint, AddressSlack:
		default:
			t.Errorf("%s: address kind %q", s.Name, s.Address)
		}
		switch s.Class {
		case ClassEmail, ClassMessaging, ClassWebhook, ClassChat:
		default:
			t.Errorf("%s: class %q", s.Name, s.Class)
		}
		p := s.Profile
		if len(p.Delays) == 0 || p.Lifetime <= 0 || p.Timeout <= 0 || p.Jitter < 0 || p.Jitter >= 1 {
			t.Errorf("%s: profile %+v", s.Name, p)
		}
		if len(s.Handles) == 0 {
			t.Errorf("%s: no approval handles", s.Name)
		}
		for _, h := range s.Handles {
			if !slices.Contains([]string{HandleToken, HandleCode, HandleButton, HandleSigned}, h) {
				t.Errorf("%s: handle kind %q", s.Name, h)
			}
		}
		got, ok := Channel(s.Name)
		if !ok || got.Name != s.Name {
			t.Errorf("Channel(%q) = %+v, %v", s.Name, got, ok)
		}
		for _, r := range CanonicalPartTypes() {
			if _, ok := r.Rules[s.Name]; !ok {
				t.Errorf("part type %s has no rule for %s", r.ID, s.Name)
			}
		}
	}
	// The table is a value: changing what one call returned changes
	// nothing for the next.
	a := ChannelSpecs()
	a[0].Profile.Delays[0] = time.Hour
	a[0].Handles[0] = "tampered"
	if b := ChannelSpecs(); b[0].Profile.Delays[0] == time.Hour || b[0].Handles[0] == "tampered" {
		t.Fatal("ChannelSpecs shares state between calls")
	}
	if _, ok := Channel("telegram"); ok {
		t.Error("Channel(telegram) found")
	}
	if _, err := LookupChannel("telegram"); err == nil || !strings.Contains(err.Error(), `"telegram"`) {
		t.Errorf("LookupChannel(telegram) = %v, want an error naming it", err)
	}
}

func TestAddressesAndRecipientKeys(t *testing.T) {
	sms, wa, em, wh := MustChannel(ChannelSMS), MustChannel(ChannelWhatsApp), MustChannel(ChannelEmail), MustChannel(ChannelWebhook)
	for _, tc := range []struct {
		spec    ChannelSpec
		in, out string
		bad     bool
	}{
		{em, "Alice <Alice@EXAMPLE.org>", "Alice@example.org", false},
		{em, "not an address", "", true},
		{sms, "+447700900123", "+447700900123", false},
		{wa, "whatsapp:+447700900123", "+447700900123", false},
		{sms, "07700 900123", "", true},
		{wh, "ops", "ops", false},
		{wh, "", "", true},
		{em, strings.Repeat("a", 400) + "@example.org", "", true},
	} {
		got, err := tc.spec.Normalize(tc.in)
		if (err != nil) != tc.bad || got != tc.out {
			t.Errorf("%s.Normalize(%q) = %q, %v", tc.spec.Name, tc.in, got, err)
		}
	}
	// A number stands for its SMS and WhatsApp recipients alike.
	if a, b := sms.RecipientKey(Recipient{Channel: ChannelSMS, Address: "+447700900123"}),
		wa.RecipientKey(Recipient{Channel: ChannelWhatsApp, Address: "whatsapp:+447700900123"}); a != b || a != "number:+447700900123" {
		t.Errorf("number keys %q and %q", a, b)
	}
	if k := em.RecipientKey(Recipient{Channel: ChannelEmail, Address: "Alice@Example.org"}); k != "email:alice@example.org" {
		t.Errorf("email key %q", k)
	}
	if k := wh.RecipientKey(Recipient{Channel: ChannelWebhook, Endpoint: "ops"}); k != "webhook:ops" {
		t.Errorf("webhook key %q", k)
	}
}

// Every channel name the module's Go source uses resolves to a spec: the
// Channel* constants of this package, and every string literal given as a
// channel (Channel: "…", channel == "…", "channel": "…") outside tests.
func TestEveryChannelNameUsedHasASpec(t *testing.T) {
	fs := token.NewFileSet()
	pkgs, err := parser.ParseDir(fs, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := 0
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, sp := range g.Specs {
					vs := sp.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if !strings.HasPrefix(n.Name, "Channel") || i >= len(vs.Values) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						v, _ := strconv.Unquote(lit.Value)
						consts++
						if _, ok := Channel(v); !ok {
							t.Errorf("constant %s = %q has no channel spec", n.Name, v)
						}
					}
				}
			}
		}
	}
	if consts != len(ChannelNames()) {
		t.Errorf("%d Channel* constants for %d specs", consts, len(ChannelNames()))
	}

	// Names that are not buffered channels but appear where a channel
	// does: the link page of approvals, the decisions an operator or an
	// approval policy takes (the channel a decision came through), and
	// the streaming transports a consumer part type may list.
	notChannels := map[string]bool{"link": true, "operator": true, "policy": true, "sse": true, "a2a": true, "mcp": true, "websocket": true, "": true}
	lit := regexp.MustCompile(`(?:Channel:\s*|[Cc]hannel\s*[!=]=\s*|"channel":\s*)"([a-zA-Z0-9_-]*)"`)
	root := filepath.Join("..")
	found := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n != ".." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
			found++
			if _, ok := Channel(m[1]); !ok && !notChannels[m[1]] {
				t.Errorf("%s: channel %q has no spec", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 10 {
		t.Fatalf("the scan found %d channel literals: it no longer reads the source", found)
	}
}

// A Slack recipient is a user id, a conversation id, or a user's email
// address; anything else is refused naming what was given.
func TestSlackAddresses(t *testing.T) {
	spec := MustChannel(ChannelSlack)
	for in, want := range map[string]string{
		"U012AB3CD": "U012AB3CD", "W0123ABC": "W0123ABC", "C0123ABCD": "C0123ABCD", "G01ABC": "G01ABC",
		"Alice@Example.ORG": "Alice@example.org",
	} {
		got, err := spec.Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "u012ab3cd", "#general", "<@U012AB3CD>", "X0123", "U0", "alice@", "U012AB3CD\n"} {
		if got, err := spec.Normalize(bad); err == nil {
			t.Errorf("Normalize(%q) = %q, want an error", bad, got)
		}
	}
	if !SlackUser("U012AB3CD") || SlackUser("C0123ABCD") || !SlackConversation("C0123ABCD") || SlackConversation("alice@example.org") {
		t.Error("SlackUser/SlackConversation disagree with the id's first letter")
	}
	if spec.Fold(" Alice@Example.org ") != "alice@example.org" || spec.Fold("U012AB3CD") != "U012AB3CD" {
		t.Error("Fold")
	}
}

// Slack follows messaging's rules, plus the parts a rich message shows.
func TestSlackPartRules(t *testing.T) {
	r := NewRegistry()
	for id, want := range map[string]Rule{
		PartResponse: Keep, PartDomainData: Keep, PartA2UISurface: Keep, PartCitation: Keep,
		PartLLMContext: Drop, PartReasoningTrace: Drop, PartSetState: Drop, PartApprovalRequest: Keep, PartArtifact: Keep,
	} {
		p, _ := r.PartType(id)
		if got := p.Rules[ChannelSlack]; got != want {
			t.Errorf("%s on slack: %v, want %v", id, got, want)
		}
	}
}
