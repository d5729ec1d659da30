package email

import (
	"strings"
	"testing"
)

var convKey = []byte("conversation key for the tests, 32b")

const cnvA = "cnv_01jd3m7w9x8k2p4q6r8s0t2v4w"

func TestReplyAddressRoundTrip(t *testing.T) {
	ra, err := ReplyAddress(convKey, "Travel Agent <Travel@Example.ORG>", cnvA)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ra, "travel+c-"+cnvA+".") || !strings.HasSuffix(ra, "@example.org") {
		t.Fatalf("reply address %q", ra)
	}
	local := strings.TrimSuffix(ra, "@example.org")
	mac := local[strings.LastIndexByte(local, '.')+1:]
	if len(mac) != 16 || strings.Trim(mac, "abcdefghijklmnopqrstuvwxyz234567") != "" {
		t.Fatalf("mac %q is not 16 characters of lower-case base32", mac)
	}
	for _, addr := range []string{ra, strings.ToUpper(ra), "<" + ra + ">", " " + ra + " "} {
		if cnv, ok := ConversationFromAddress(convKey, addr); !ok || cnv != cnvA {
			t.Errorf("%q: %q %v", addr, cnv, ok)
		}
	}
	// Another local part or domain carries the same signed tag: the MAC
	// is over the conversation alone, so the answer may go out from any
	// of the agent's addresses.
	other := "replies+" + ra[strings.IndexByte(ra, '+')+1:strings.IndexByte(ra, '@')] + "@reply.example.net"
	if cnv, ok := ConversationFromAddress(convKey, other); !ok || cnv != cnvA {
		t.Errorf("%q: %q %v", other, cnv, ok)
	}
}

func TestConversationFromAddressRefuses(t *testing.T) {
	ra, err := ReplyAddress(convKey, "travel@example.org", cnvA)
	if err != nil {
		t.Fatal(err)
	}
	local, domain, _ := strings.Cut(ra, "@")
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'a' {
			b[i] = 'b'
		} else {
			b[i] = 'a'
		}
		return string(b)
	}
	macStart := strings.LastIndexByte(local, '.') + 1
	cases := map[string]string{
		"another key":            "",
		"mac changed":            flip(local, macStart+3) + "@" + domain,
		"conversation changed":   flip(local, strings.Index(local, "cnv_")+6) + "@" + domain,
		"mac cut":                local[:len(local)-1] + "@" + domain,
		"mac longer":             local + "a@" + domain,
		"no mac":                 local[:macStart-1] + "@" + domain,
		"no tag prefix":          strings.Replace(local, "+c-", "+", 1) + "@" + domain,
		"no base local part":     local[strings.IndexByte(local, '+'):] + "@" + domain,
		"no domain":              local + "@",
		"no at":                  local,
		"empty":                  "",
		"approval token address": "approvals+" + tokA + "@reply.beachd.test",
		"plain address":          "travel@example.org",
		"dot in the id":          "travel+c-cnv.x." + local[macStart:] + "@" + domain,
		"too long":               strings.Repeat("a", 400) + ra,
	}
	for name, addr := range cases {
		key := convKey
		if name == "another key" {
			key, addr = []byte("another key"), ra
		}
		if cnv, ok := ConversationFromAddress(key, addr); ok || cnv != "" {
			t.Errorf("%s: %q gave %q %v", name, addr, cnv, ok)
		}
	}
	if _, ok := ConversationFromAddress(nil, ra); ok {
		t.Error("verified without a key")
	}
}

func TestReplyAddressRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		key        []byte
		base, conv string
	}{
		"no key":             {nil, "travel@example.org", cnvA},
		"base not an addr":   {convKey, "travel", cnvA},
		"base with a tag":    {convKey, "travel+x@example.org", cnvA},
		"upper-case id":      {convKey, "travel@example.org", "cnv_ABC"},
		"id with a dot":      {convKey, "travel@example.org", "cnv.x"},
		"id with an at":      {convKey, "travel@example.org", "cnv@x"},
		"empty id":           {convKey, "travel@example.org", ""},
		"local part too big": {convKey, strings.Repeat("t", 20) + "@example.org", cnvA},
		"header injection":   {convKey, "travel@example.org\r\nBcc: x@y", cnvA},
	} {
		if ra, err := ReplyAddress(c.key, c.base, c.conv); err == nil {
			t.Errorf("%s: %q", name, ra)
		}
	}
}

// FuzzConversationFromAddress: whatever the address, a conversation comes
// back only with the right MAC, it has the shape of an id, and the reply
// address built for it verifies again.
func FuzzConversationFromAddress(f *testing.F) {
	ra, _ := ReplyAddress(convKey, "travel@example.org", cnvA)
	for _, s := range []string{ra, "<" + ra + ">", "approvals+" + tokA + "@reply.beachd.test", "a+c-.@b", "+c-x.y@z", "@", "a@b@c",
		"x+c-cnv_1.aaaaaaaaaaaaaaaa@d", strings.ToUpper(ra)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		cnv, ok := ConversationFromAddress(convKey, addr)
		if !ok {
			if cnv != "" {
				t.Fatalf("%q: not ok with %q", addr, cnv)
			}
			return
		}
		if !validConvID(cnv) {
			t.Fatalf("%q: conversation %q has the wrong shape", addr, cnv)
		}
		if cnv != cnvA {
			t.Fatalf("%q: forged conversation %q", addr, cnv)
		}
		if _, ok := ConversationFromAddress([]byte("another key"), addr); ok {
			t.Fatalf("%q verifies under another key", addr)
		}
	})
}
