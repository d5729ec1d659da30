package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// The look of the confirmation page: the visual language of the emails
// (zinc greys, one white card, the amber "Approval needed" band, blue
// links), one column that reads on a 390 px phone, buttons of at least 48 px
// for a thumb. One stylesheet, allowed by its hash; no script at all.
const pageCSS = `*{box-sizing:border-box}
body{margin:0;background:#f4f4f5;color:#18181b;font:16px/1.55 -apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif}
main{max-width:600px;margin:0 auto;padding:24px 12px}
.card{background:#fff;border:1px solid #e4e4e7;border-radius:8px;padding:24px 20px}
.band{background:#fffbeb;border:1px solid #fcd34d;border-radius:6px;padding:14px 16px;margin:0 0 18px}
.band.done{background:#f4f4f5;border-color:#e4e4e7}
.band.done .eyebrow{color:#52525b}
.eyebrow{margin:0 0 4px;font-size:12px;font-weight:700;letter-spacing:.05em;text-transform:uppercase;color:#92400e}
h1{margin:0;font-size:20px;line-height:1.3}
.state{border-radius:6px;padding:14px 16px;margin:0 0 18px;font-weight:600}
.state.granted{background:#f0fdf4;border:1px solid #86efac;color:#14532d}
.state.denied,.state.expired,.state.void{background:#fef2f2;border:1px solid #fca5a5;color:#7f1d1d}
.state.info{background:#eff6ff;border:1px solid #93c5fd;color:#1e3a8a}
table{border-collapse:collapse;width:100%;margin:0 0 16px}
th,td{text-align:left;vertical-align:top;padding:6px 0;border-bottom:1px solid #f4f4f5;overflow-wrap:anywhere}
th{width:38%;padding-right:12px;font-weight:400;color:#52525b}
td.num{font-variant-numeric:tabular-nums;font-weight:600}
code{font-family:Menlo,Consolas,monospace;font-size:14px}
h2{font-size:13px;font-weight:700;letter-spacing:.04em;text-transform:uppercase;color:#52525b;margin:20px 0 6px}
blockquote{margin:0 0 16px;padding:0 0 0 12px;border-left:3px solid #d4d4d8;color:#3f3f46;white-space:pre-line}
.left{font-weight:600}
label{display:block;font-weight:600;margin:20px 0 6px}
textarea{width:100%;font:inherit;padding:10px;border:1px solid #a1a1aa;border-radius:6px;min-height:4.5em}
textarea:focus,button:focus{outline:3px solid #93c5fd;outline-offset:2px}
.buttons{display:flex;gap:12px;margin:16px 0 0}
button{flex:1;min-height:52px;font:inherit;font-size:18px;font-weight:700;border:0;border-radius:8px;color:#fff;cursor:pointer}
button.approve{background:#15803d}
button.deny{background:#b91c1c}
.fine{margin:16px 0 0;font-size:13px;color:#52525b}
.lead{margin:0 0 16px}
.lead p{margin:0 0 8px}
code.tool{font-size:12px;color:#52525b}`

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>{{.Title}}</title><style>{{.CSS}}</style></head><body>
<main><div class="card">
{{if .Approval}}<div class="band{{if not .Pending}} done{{end}}"><p class="eyebrow">{{if .Pending}}Approval needed{{else}}Approval request{{end}}</p>
<h1>{{.Summary}}</h1></div>
{{if .Message}}<p class="state info" role="status">{{.Message}}</p>{{end}}
{{if .Decision}}<p class="state {{.StateClass}}" role="status">{{.Decision}}</p>{{end}}
{{if .Pending}}<div class="lead"><p>{{if .Organisation}}<strong>{{.Organisation}}</strong> asks for your approval before its assistant goes ahead.{{else}}An automated assistant asks for your approval before it goes ahead.{{end}}</p>
<p>Approving lets it go ahead with this action: <strong>{{.Action}}</strong>, as set out below. Denying stops it.</p>
{{if gt .Asked 1}}<p>You are not the only one asked: {{.Asked}} people were asked, and the first answer decides for everyone.</p>{{end}}</div>{{end}}
<table><caption class="eyebrow" hidden>Request</caption>
{{if .Organisation}}<tr><th scope="row">Requested by</th><td>{{.Organisation}}</td></tr>{{end}}
<tr><th scope="row">Action</th><td>{{.Action}}{{if and .Tool (ne .Action .Tool)}} <code class="tool">{{.Tool}}</code>{{end}}</td></tr>
{{range .ArgRows}}<tr><th scope="row">{{.Name}}</th><td{{if .Amount}} class="num"{{end}}>{{.Value}}</td></tr>
{{end}}{{if .Pending}}<tr><th scope="row">Expires in</th><td><span class="left">{{.TimeLeft}}</span><br>{{.Expires}}</td></tr>{{end}}
</table>
{{if .Why}}<h2>Why</h2><blockquote>{{.Why}}</blockquote>{{end}}
{{if .AgentMessage}}<h2>The assistant's message</h2><blockquote>{{.AgentMessage}}</blockquote>{{end}}
{{if .Pending}}<form method="post" action="">
<input type="hidden" name="nonce" value="{{.Nonce}}">
<label for="reason">Reason (optional)</label>
<textarea id="reason" name="reason" rows="3" maxlength="500" aria-describedby="reason-help"></textarea>
<p class="fine" id="reason-help">The assistant receives your reason with your answer.</p>
<div class="buttons"><button type="submit" name="decision" value="granted" class="approve" aria-describedby="final">Approve</button>
<button type="submit" name="decision" value="denied" class="deny" aria-describedby="final">Deny</button></div>
<p class="fine" id="final">Your answer is final: once sent, it cannot be changed{{if gt .Asked 1}}, and if someone else answers first, theirs is the one that counts{{end}}.</p>
</form>{{end}}
{{else}}<h1>{{.Title}}</h1>
{{if .Message}}<p>{{.Message}}</p>{{end}}{{end}}
</div></main>
</body></html>
`))

type pageData struct {
	Title, Message                         string
	CSS                                    template.CSS // a constant of ours, so trusted
	Approval                               bool
	Summary, Tool, Expires, Decision, Args string
	// Organisation is who asks (organisation.name); empty, the page
	// words it neutrally. Action is what approving does, in plain words:
	// the tool's title, or its name made readable.
	Organisation, Action string
	// Asked is how many people were asked.
	Asked   int
	Pending bool
	Nonce   string

	// ToolTitle is the tool's human title when the request names one.
	ToolTitle string
	// ArgRows are the tool's arguments as a readable table.
	ArgRows []ArgRow
	// Why is the reason the agent gave for asking; AgentMessage the text it
	// sent with the request.
	Why, AgentMessage string
	// TimeLeft is "2 hours", "12 minutes"; StateClass styles Decision
	// (granted, denied, expired, void).
	TimeLeft, StateClass string
}

// ArgRow is one tool argument, as a person reads it.
type ArgRow struct {
	Name, Value string
	// Amount: the value is a formatted amount of money.
	Amount bool
}

// maxArgRows bounds the table; the rest is summarised in one row.
const maxArgRows = 20

// ArgRows turns tool arguments into rows: names humanised ("flight_number"
// → "Flight number"), amounts formatted with their currency ("GBP 1,122.00"),
// booleans as yes/no, lists and flat objects as short text, the rest compact
// JSON; every value bounded.
func ArgRows(args map[string]any) []ArgRow {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	currency, _ := args["currency"].(string)
	if len(currency) > 8 {
		currency = ""
	}
	var out []ArgRow
	for i, k := range keys {
		if i == maxArgRows {
			out = append(out, ArgRow{Name: "…", Value: fmt.Sprintf("%d more", len(keys)-maxArgRows)})
			break
		}
		row := ArgRow{Name: humanName(k)}
		if n, ok := args[k].(float64); ok && moneyKey(k) {
			row.Value, row.Amount = formatAmount(n, currency), true
		} else if v, ok := money(args[k]); ok {
			row.Value, row.Amount = v, true
		} else {
			row.Value = clip(argText(args[k]), 300)
		}
		out = append(out, row)
	}
	return out
}

// money reads {"amount": 1122, "currency": "GBP"} (an object of exactly
// those two) as an amount.
func money(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 2 {
		return "", false
	}
	n, ok1 := m["amount"].(float64)
	c, ok2 := m["currency"].(string)
	if !ok1 || !ok2 || len(c) > 8 {
		return "", false
	}
	return formatAmount(n, c), true
}

func moneyKey(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"amount", "price", "total", "cost", "fee", "sum"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// formatAmount writes n with two decimals and thousands separators.
func formatAmount(n float64, currency string) string {
	neg := n < 0
	cents := int64(math.Round(math.Abs(n) * 100))
	whole := strconv.FormatInt(cents/100, 10)
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	s := fmt.Sprintf("%s.%02d", b.String(), cents%100)
	if neg {
		s = "−" + s
	}
	if currency != "" {
		s = strings.ToUpper(currency) + " " + s
	}
	return s
}

func humanName(k string) string {
	var b strings.Builder
	prevLower := false
	for _, r := range k {
		switch {
		case r == '_' || r == '-' || r == '.':
			b.WriteByte(' ')
			prevLower = false
			continue
		case r >= 'A' && r <= 'Z' && prevLower:
			b.WriteByte(' ')
			r += 'a' - 'A'
		}
		prevLower = r >= 'a' && r <= 'z'
		b.WriteRune(r)
	}
	s := strings.TrimSpace(b.String())
	if s == "" {
		return k
	}
	r, n := utf8.DecodeRuneInString(s)
	return clip(strings.ToUpper(string(r))+s[n:], 60)
}

func argText(v any) string {
	switch x := v.(type) {
	case nil:
		return "(none)"
	case string:
		return x
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				b, _ := json.Marshal(x)
				return string(b)
			}
			parts = append(parts, argText(e))
		}
		return strings.Join(parts, ", ")
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				b, _ := json.Marshal(x)
				return string(b)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = humanName(k) + ": " + argText(x[k])
		}
		return strings.Join(parts, "; ")
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// TimeLeft says how long until t, for a person: "3 hours 20 minutes",
// "12 minutes", "less than a minute".
func TimeLeft(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "less than a minute"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute")
	case d < 48*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 || h >= 10 {
			return plural(h, "hour")
		}
		return plural(h, "hour") + " " + plural(m, "minute")
	}
	return plural(int(d/(24*time.Hour)), "day")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

// requestContext finds, in the envelope that carried the approval, the
// reason the agent gave in the approval-request part (reason, why,
// justification, rationale; or the request's title) and the agent's own
// message (its response text), each bounded. Errors leave them empty: the
// page shows what it has.
func (s *Service) requestContext(ctx context.Context, a *store.Approval) (why, message, title string) {
	rec, err := s.db.Envelope(ctx, a.EnvelopeID)
	if err != nil {
		return "", "", ""
	}
	env, err := envelope.Decode(rec.Envelope, envelope.Limits{})
	if err != nil {
		return "", "", ""
	}
	for _, p := range env.Parts {
		switch p.PartType() {
		case "response":
			if message == "" {
				message = clip(plainText(p.TextValue()), 1200)
			}
		case "approval-request":
			m, err := p.DataObject()
			if err != nil || m["approvalId"] != a.ID {
				continue
			}
			for _, k := range []string{"reason", "why", "justification", "rationale"} {
				if v, ok := m[k].(string); ok && strings.TrimSpace(v) != "" {
					why = clip(strings.TrimSpace(v), 500)
					break
				}
			}
			for _, k := range []string{"toolTitle", "title"} {
				if v, ok := m[k].(string); ok && strings.TrimSpace(v) != "" {
					title = clip(strings.TrimSpace(v), 80)
					break
				}
			}
		}
	}
	return why, message, title
}

var mdLink = regexp.MustCompile(`\[([^\]\n]{1,200})\]\([^)\s]{1,1000}\)`)

// plainText reads the agent's Markdown as a person would: emphasis marks
// and link targets dropped, the words kept.
func plainText(md string) string {
	md = mdLink.ReplaceAllString(md, "$1")
	return strings.TrimSpace(strings.NewReplacer("**", "", "__", "", "`", "").Replace(md))
}

// stateClass names the style of a decided approval's state line.
func stateClass(state string) string {
	switch state {
	case store.ApprovalGranted, store.ApprovalDenied, store.ApprovalExpired, store.ApprovalVoid:
		return state
	}
	return "expired"
}
