package approvals

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
)

func TestTokenFormats(t *testing.T) {
	m := minter{key: []byte(strings.Repeat("k", 32))}
	tok := m.token(KindToken, "a1", "email", "alice@example.org", "n")
	if got, ok := ParseToken(strings.ToUpper(tok)); !ok || got != tok || len(tok) != 26 {
		t.Fatalf("token %q", tok)
	}
	if m.token(KindLink, "a1", "email", "alice@example.org", "n") == tok {
		t.Fatal("link token equals email token")
	}
	if m.token(KindToken, "a1", "email", "bob@example.org", "n") == tok || m.token(KindToken, "a1", "email", "alice@example.org", "m") == tok {
		t.Fatal("token does not depend on recipient and nonce")
	}
	// Field boundaries are unambiguous.
	if m.token(KindToken, "a1", "emailx", "y", "n") == m.token(KindToken, "a1", "email", "xy", "n") {
		t.Fatal("ambiguous field encoding")
	}
	if c := m.code("a1", "sms", "+1", "n", 6); len(c) != 6 || !isDigits(c) {
		t.Fatalf("code %q", c)
	}
	for _, bad := range []string{"", "abc", strings.Repeat("a", 25), strings.Repeat("a", 27), strings.Repeat("1", 26), strings.Repeat("a", 25) + "!"} {
		if _, ok := ParseToken(bad); ok {
			t.Errorf("ParseToken(%q) ok", bad)
		}
	}
	for in, want := range map[string][2]string{"a1:abc": {"a1", "abc"}, "a:b:c2": {"a:b", "c2"}} {
		id, n, ok := ParseButtonPayload(in)
		if !ok || id != want[0] || n != want[1] {
			t.Errorf("ParseButtonPayload(%q) = %q %q %v", in, id, n, ok)
		}
	}
	for _, bad := range []string{"", ":", "a:", ":b", "ab", "a:B!", "a:1"} {
		if _, _, ok := ParseButtonPayload(bad); ok {
			t.Errorf("ParseButtonPayload(%q) ok", bad)
		}
	}
	codes := map[string]string{"YES 123456": "123456", "123456 no": "123456", "no, 123456: too dear": "123456",
		"yes 12345": "", "yes 1234567": "", "yes 123456 654321": "", "yes 123456 123456": "123456", "yes\n123456": ""}
	for in, want := range codes {
		got, ok := FindCode(in, 6)
		if got != want || ok != (want != "") {
			t.Errorf("FindCode(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	if r := stripCode("123456 too dear", "123456"); r != "too dear" {
		t.Errorf("stripCode %q", r)
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "", "a", strings.Repeat("2", 26), " abcdefghijklmnopqrstuvwxy7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, ok := ParseToken(s)
		if !ok {
			return
		}
		if len(tok) != TokenLen || strings.IndexFunc(tok, func(r rune) bool { return !isBase32Lower(r) }) >= 0 {
			t.Fatalf("accepted %q as %q", s, tok)
		}
		if again, ok := ParseToken(tok); !ok || again != tok {
			t.Fatal("not idempotent")
		}
	})
}

func FuzzParseButtonPayload(f *testing.F) {
	for _, s := range []string{"appr-1:abcdef", "a:b:c", ":", "x:", ":y", "appr:ABC"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, nonce, ok := ParseButtonPayload(s)
		if !ok {
			return
		}
		if id == "" || nonce == "" || id+":"+nonce != s || strings.Contains(nonce, ":") {
			t.Fatalf("%q → %q %q", s, id, nonce)
		}
	})
}

func FuzzFindCode(f *testing.F) {
	for _, s := range []string{"YES 123456", "no 123456 too dear", "123456", "yes 1234567", "١٢٣٤٥٦ yes", ""} {
		f.Add(s, 6)
	}
	f.Fuzz(func(t *testing.T, s string, digits int) {
		if digits < 1 || digits > 12 {
			return
		}
		code, ok := FindCode(s, digits)
		if !ok {
			if code != "" {
				t.Fatal("code without ok")
			}
			return
		}
		if len(code) != digits || !isDigits(code) || !strings.Contains(s, code) {
			t.Fatalf("FindCode(%q, %d) = %q", s, digits, code)
		}
		_ = stripCode(s, code)
	})
}

// FuzzAnswerShape: whatever a text says, answerShape either finds no
// answer or returns ASCII digits about a code's length that occur in the
// text's first line.
func FuzzAnswerShape(f *testing.F) {
	for _, s := range []string{"YES 111111", "no, 48219", "482193", "yes 2 people", "YES111111", "ok 1234567 thanks", "١٢٣٤٥٦", "", "\n\n no 12345"} {
		f.Add(s)
	}
	svc := &Service{cfg: Config{CodeDigits: 6, Words: englishWords}}
	f.Fuzz(func(t *testing.T, s string) {
		digits, ok := svc.answerShape(s)
		if !ok {
			if digits != "" {
				t.Fatal("digits without ok")
			}
			return
		}
		if !isDigits(digits) || len(digits) < 4 || len(digits) > 8 || !strings.Contains(firstLine(s), digits) {
			t.Fatalf("answerShape(%q) = %q", s, digits)
		}
	})
}

// FuzzLinkHandler throws arbitrary paths, methods and forms at the link
// page: it never panics, never answers 5xx, and never changes the
// approval's state except through a POST carrying the page's valid nonce.
func FuzzLinkHandler(f *testing.F) {
	db := storetest.Open(f, bolt.Options{})
	svc, err := New(Config{Secret: []byte(strings.Repeat("z", 32)), PublicURL: "http://x"}, db, nil, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	env := &envelope.Envelope{Role: "agent", Parts: []envelope.Part{{Data: mustJSON(map[string]any{"approvalId": "fz", "toolName": "t",
		"toolCallId": "c", "args": map[string]any{}, "handler": "h", "turn": "t", "session": "s"}), Metadata: map[string]any{"partType": "approval-request"}}},
		Meta: envelope.Meta{SessionID: "s", TurnID: "t", ProducedAt: time.Now(), FinalizedBy: "suspended"}}
	as, per, err := svc.Prepare(f.Context(), env, []envelope.Recipient{{Channel: "email", Address: "a@example.org"}}, "ag")
	if err != nil {
		f.Fatal(err)
	}
	res, err := db.Ingest(f.Context(), store.Ingest{Envelope: mustJSON(env), Agent: "ag", Approvals: as,
		Deliveries: []store.NewDelivery{{Channel: "email", To: "a@example.org", ApprovalIDs: per[0]}}})
	if err != nil {
		f.Fatal(err)
	}
	hs, err := svc.Handles(f.Context(), res.Deliveries[0], env)
	if err != nil {
		f.Fatal(err)
	}
	tok := strings.TrimPrefix(hs[0].LinkURL, "http://x/a/")
	mux := http.NewServeMux()
	mux.Handle("/a/{token}", svc.LinkHandler())
	f.Add("GET", tok, "", "")
	f.Add("HEAD", tok, "", "")
	f.Add("POST", tok, "granted", "1.abc")
	f.Add("POST", strings.ToUpper(tok), "denied", "")
	f.Add("PUT", "x", "granted", "")
	f.Add("POST", tok+"%00", "granted", "9999999999.aaaa")
	f.Fuzz(func(t *testing.T, method, token, decision, nonce string) {
		if method == "" || strings.ContainsAny(method, " \t\r\n()<>@,;:\\\"/[]?={}") || len(method) > 10 {
			return
		}
		form := url.Values{"decision": {decision}, "nonce": {nonce}}.Encode()
		req, err := http.NewRequest(method, "http://x/a/"+url.PathEscape(token), strings.NewReader(form))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %q: %d", method, token, w.Code)
		}
		if w.Header().Get("Content-Security-Policy") == "" && w.Code != 404 && w.Code != 301 && w.Code != 307 && w.Code != 308 {
			t.Fatalf("no CSP on %d", w.Code)
		}
		a, err := db.Approval(t.Context(), "fz")
		if err != nil {
			t.Fatal(err)
		}
		if a.State != store.ApprovalPending {
			t.Fatalf("%s %q decision=%q nonce=%q changed the state to %s", method, token, decision, nonce, a.State)
		}
	})
}
