package approvals

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cool-ai/beachd/envelope"
)

// TestLinkPageSaysWhoAsksAndWhatApprovingDoes: the approval page says who
// asks (organisation.name, or neutral words; never the agent's or the
// handler's internal name), what approving does in plain words, that the
// answer is final, and — only when several people were asked — that the
// first answer decides for everyone. What the agent wrote (the why, its
// message) and the organisation's name are escaped.
func TestLinkPageSaysWhoAsksAndWhatApprovingDoes(t *testing.T) {
	for _, tc := range []struct {
		name, org string
		to        []envelope.Recipient
		want      []string
		not       []string
	}{
		{name: "named, one person", org: "Acme <b>Travel</b>", to: []envelope.Recipient{email(alice)},
			want: []string{"<strong>Acme &lt;b&gt;Travel&lt;/b&gt;</strong> asks for your approval before its assistant goes ahead.",
				"<th scope=\"row\">Requested by</th><td>Acme &lt;b&gt;Travel&lt;/b&gt;</td>",
				"Approving lets it go ahead with this action: <strong>Book flight</strong>, as set out below. Denying stops it.",
				"Your answer is final: once sent, it cannot be changed.",
				"<h2>Why</h2><blockquote>Charges the card &lt;script&gt;alert(1)&lt;/script&gt; on file.</blockquote>",
				"<h2>The assistant's message</h2><blockquote>Ready to book &lt;img src=x onerror=alert(2)&gt;</blockquote>"},
			not: []string{"people were asked", "first answer", "<b>Travel", "<script>", "<img"}},
		{name: "unnamed, three people", to: []envelope.Recipient{email(alice), sms("+447700900123"), wa("+447700900123"), email("bob@example.org"), sms("+447700900456")},
			want: []string{"An automated assistant asks for your approval before it goes ahead.",
				"You are not the only one asked: 4 people were asked, and the first answer decides for everyone.",
				"Your answer is final: once sent, it cannot be changed, and if someone else answers first, theirs is the one that counts."},
			not: []string{"Requested by", "asks for your approval before its assistant"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOpt{cfg: func(c *Config) { c.Organisation = tc.org }})
			env := h.suspend("appr-words")
			hostile := "Ready to book <img src=x onerror=alert(2)>"
			env.Parts = append(envelope.Parts{{Text: &hostile, Metadata: map[string]any{"partType": "response"}}}, env.Parts...)
			for i, p := range env.Parts {
				if p.PartType() == "approval-request" {
					m, err := p.DataObject()
					if err != nil {
						t.Fatal(err)
					}
					m["reason"], m["handler"] = "Charges the card <script>alert(1)</script> on file.", "travel-booker"
					env.Parts[i].Data, _ = json.Marshal(m)
				}
			}
			ds := h.ingest(env, tc.to...)
			hd := h.handle(ds[0])
			mux := http.NewServeMux()
			mux.Handle("/a/{token}", h.svc.LinkHandler())
			srv := httptest.NewServer(mux)
			defer srv.Close()
			res, err := http.Get(srv.URL + strings.TrimPrefix(hd.LinkURL, "https://beachd.example.org"))
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, res)
			if res.StatusCode != 200 {
				t.Fatalf("%d:\n%s", res.StatusCode, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("the page lacks %q:\n%s", w, body)
				}
			}
			// Never the internal names: the agent ("travel") and the handler.
			for _, n := range append(tc.not, "travel-booker", ">travel<", "(travel", "travel (") {
				if strings.Contains(body, n) {
					t.Errorf("the page shows %q:\n%s", n, body)
				}
			}
		})
	}
}
