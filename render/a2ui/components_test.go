package a2ui

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type componentCase struct {
	name       string // the catalog component it covers first
	components string
	data       string
	text       []string // substrings of Result.Text
	html       []string // substrings of Result.HTML
	notText    []string
	notHTML    []string
	texts      []string // members of Result.Texts
}

var componentCases = []componentCase{
	{
		name:       "Text",
		components: `[{"id":"root","component":"Column","children":["h","b","c"]},{"id":"h","component":"Text","text":"Hello **world**","variant":"h1"},{"id":"b","component":"Text","text":{"path":"/msg"}},{"id":"c","component":"Text","text":"_small_ print","variant":"caption"}]`,
		data:       `{"msg":"Bound <b>body</b>"}`,
		text:       []string{"Hello world\n===========", "Bound <b>body</b>", "small print"},
		html:       []string{"<h1 ", "Hello <strong>world</strong></h1>", "Bound &lt;b&gt;body&lt;/b&gt;", "<em>small</em> print", "font-size:12px"},
		notText:    []string{"**", "_small_"},
		texts:      []string{"Hello world", "Bound <b>body</b>", "small print"},
	},
	{
		name:       "Image",
		components: `[{"id":"root","component":"Column","children":["i","a"]},{"id":"i","component":"Image","url":{"path":"/u"},"description":"A red bicycle"},{"id":"a","component":"Image","url":"https://example.com/me.png","variant":"avatar","description":"Ada"}]`,
		data:       `{"u":"https://example.com/bike.jpg"}`,
		text:       []string{"[image: A red bicycle] https://example.com/bike.jpg", "[image: Ada] https://example.com/me.png"},
		html:       []string{`<img src="https://example.com/bike.jpg" alt="A red bicycle" width="300"`, `alt="Ada" width="48" height="48"`, "border-radius:50%"},
	},
	{
		name:       "Icon",
		components: `[{"id":"root","component":"Row","children":["i","j","t"]},{"id":"i","component":"Icon","name":"mail"},{"id":"j","component":"Icon","name":{"path":"/icon"}},{"id":"t","component":"Text","text":"Inbox"}]`,
		data:       `{"icon":"rocket_launch"}`,
		text:       []string{"✉  [rocket launch]  Inbox"},
		html:       []string{`title="mail">✉</span>`, "[rocket launch]"},
	},
	{
		name:       "Video",
		components: `[{"id":"root","component":"Video","url":"https://example.com/v.mp4"}]`,
		text:       []string{"[video] https://example.com/v.mp4"},
		html:       []string{`<a href="https://example.com/v.mp4"`, "▶ Video"},
		notHTML:    []string{"<video"},
	},
	{
		name:       "AudioPlayer",
		components: `[{"id":"root","component":"AudioPlayer","url":"https://example.com/a.mp3","description":"Episode 4"}]`,
		text:       []string{"[audio: Episode 4] https://example.com/a.mp3"},
		html:       []string{`<a href="https://example.com/a.mp3"`, "Audio: Episode 4"},
		notHTML:    []string{"<audio"},
		texts:      []string{"Audio: Episode 4"},
	},
	{
		name:       "Row",
		components: `[{"id":"root","component":"Row","children":["a","b"],"justify":"spaceBetween"},{"id":"a","component":"Text","text":"Left"},{"id":"b","component":"Text","text":"Right"}]`,
		text:       []string{"Left    Right"},
		html:       []string{`<td valign="top" align="left"`, `align="right"`, ">Right</div>"},
	},
	{
		name:       "Column",
		components: `[{"id":"root","component":"Column","children":["a","b"],"align":"center"},{"id":"a","component":"Text","text":"Top"},{"id":"b","component":"Text","text":"Bottom"}]`,
		text:       []string{"Top\nBottom"},
		html:       []string{`<td align="center"`},
	},
	{
		name:       "List",
		components: `[{"id":"root","component":"List","children":{"componentId":"item","path":"/people"}},{"id":"item","component":"Text","text":{"call":"formatString","args":{"value":"${name} (${/team})"},"returnType":"string"}}]`,
		data:       `{"team":"Core","people":[{"name":"Ada"},{"name":"Grace"}]}`,
		text:       []string{"• Ada (Core)\n• Grace (Core)"},
		html:       []string{"Ada (Core)", "Grace (Core)", "border-bottom"},
	},
	{
		name:       "Card",
		components: `[{"id":"root","component":"Card","child":"t"},{"id":"t","component":"Text","text":"Inside"}]`,
		text:       []string{"Inside"},
		html:       []string{"border:1px solid #dadce0;border-radius:8px", "Inside"},
	},
	{
		name:       "Tabs",
		components: `[{"id":"root","component":"Tabs","tabs":[{"title":"Overview","child":"a"},{"title":{"path":"/t2"},"child":"b"}]},{"id":"a","component":"Text","text":"First body"},{"id":"b","component":"Text","text":"Second body"}]`,
		data:       `{"t2":"Details"}`,
		text:       []string{"▸ Overview\nFirst body", "▸ Details\nSecond body"},
		html:       []string{">Overview</div>", ">Details</div>", "First body", "Second body"},
		texts:      []string{"Overview", "Details", "First body", "Second body"},
	},
	{
		name:       "Modal",
		components: `[{"id":"root","component":"Modal","trigger":"open","content":"body"},{"id":"open","component":"Button","child":"ol","action":{"event":{"name":"open"}}},{"id":"ol","component":"Text","text":"Show terms"},{"id":"body","component":"Text","text":"The terms, shown inline."}]`,
		text:       []string{"[ Show terms ]", "  The terms, shown inline."},
		html:       []string{"Show terms", "The terms, shown inline."},
	},
	{
		name:       "Divider",
		components: `[{"id":"root","component":"Column","children":["a","d","b"]},{"id":"a","component":"Text","text":"Above"},{"id":"d","component":"Divider"},{"id":"b","component":"Text","text":"Below"}]`,
		text:       []string{"Above\n────", "\nBelow"},
		html:       []string{"<hr "},
	},
	{
		name:       "Button",
		components: `[{"id":"root","component":"Row","children":["go","buy","bad"]},{"id":"go","component":"Button","child":"gl","action":{"functionCall":{"call":"openUrl","args":{"url":"https://example.com/track?id=1&x=2"}}}},{"id":"gl","component":"Text","text":"Track parcel"},{"id":"buy","component":"Button","child":"bl","variant":"primary","action":{"event":{"name":"buy","context":{}}}},{"id":"bl","component":"Text","text":"Buy now"},{"id":"bad","component":"Button","child":"xl","action":{"functionCall":{"call":"openUrl","args":{"url":"javascript:alert(1)"}}}},{"id":"xl","component":"Text","text":"Sneaky"}]`,
		text:       []string{"Track parcel: https://example.com/track?id=1&x=2", "[ Buy now ]", "[ Sneaky ]"},
		html:       []string{`<a href="https://example.com/track?id=1&amp;x=2"`, ">Track parcel</a>", `<span title="This action is available in the app"`, ">Buy now</span>", ">Sneaky</span>"},
		notHTML:    []string{"javascript:", "<form", "<button", "<input"},
	},
	{
		name:       "TextField",
		components: `[{"id":"root","component":"Column","children":["n","p","e","l"]},{"id":"n","component":"TextField","label":"Name","value":{"path":"/name"}},{"id":"p","component":"TextField","label":"Password","value":{"path":"/pw"},"variant":"obscured"},{"id":"e","component":"TextField","label":"Email","value":{"path":"/email"},"checks":[{"condition":{"call":"email","args":{"value":{"path":"/email"}}},"message":"Enter a valid email"}]},{"id":"l","component":"TextField","label":"Notes","value":""}]`,
		data:       `{"name":"Ada Lovelace","pw":"hunter2","email":"not-an-email"}`,
		text:       []string{"Name: Ada Lovelace", "Password: ••••••••", "Email: not-an-email\n⚠ Enter a valid email", "Notes: (empty)"},
		html:       []string{"Ada Lovelace", "••••••••", "⚠ Enter a valid email", "(empty)"},
		notText:    []string{"hunter2"},
		notHTML:    []string{"hunter2", "<input"},
	},
	{
		name:       "CheckBox",
		components: `[{"id":"root","component":"Column","children":["a","b"]},{"id":"a","component":"CheckBox","label":"Remember me","value":{"path":"/remember"}},{"id":"b","component":"CheckBox","label":"Subscribe","value":false}]`,
		data:       `{"remember":true}`,
		text:       []string{"☑ Remember me", "☐ Subscribe"},
		html:       []string{"☑</span> Remember me", "☐</span> Subscribe"},
		notHTML:    []string{"<input"},
	},
	{
		name:       "ChoicePicker",
		components: `[{"id":"root","component":"Column","children":["m","x"]},{"id":"m","component":"ChoicePicker","label":"Toppings","variant":"multipleSelection","options":[{"label":"Cheese","value":"cheese"},{"label":"Olives","value":"olives"},{"label":{"path":"/hamLabel"},"value":"ham"}],"value":{"path":"/toppings"}},{"id":"x","component":"ChoicePicker","label":"Size","options":[{"label":"Small","value":"s"},{"label":"Large","value":"l"}],"value":["l"]}]`,
		data:       `{"toppings":["cheese","ham"],"hamLabel":"Ham"}`,
		text:       []string{"Toppings: ☑ Cheese   ☐ Olives   ☑ Ham", "Size: ○ Small   ◉ Large"},
		html:       []string{"☑ Cheese", "☐ Olives", "◉ Large"},
		texts:      []string{"Toppings", "Cheese", "Olives", "Ham", "Size", "Small", "Large"},
	},
	{
		name:       "Slider",
		components: `[{"id":"root","component":"Slider","label":"Volume","min":0,"max":100,"value":{"path":"/vol"}}]`,
		data:       `{"vol":30}`,
		text:       []string{"Volume: ███░░░░░░░ 30 (0–100)"},
		html:       []string{`width="30%"`, "30 (0–100)"},
	},
	{
		name:       "DateTimeInput",
		components: `[{"id":"root","component":"Column","children":["d","t","o","e"]},{"id":"d","component":"DateTimeInput","label":"Due","value":{"path":"/due"},"enableDate":true,"enableTime":true},{"id":"t","component":"DateTimeInput","label":"Alarm","value":"07:30","enableTime":true},{"id":"o","component":"DateTimeInput","label":"Birthday","value":"1990-04-01","enableDate":true},{"id":"e","component":"DateTimeInput","label":"Start","value":""}]`,
		data:       `{"due":"2026-08-15T08:45:00Z"}`,
		text:       []string{"Due: 15 Aug 2026 08:45", "Alarm: 07:30", "Birthday: 1 Apr 1990", "Start: (not set)"},
		html:       []string{"15 Aug 2026 08:45", "(not set)"},
	},
}

func TestComponents(t *testing.T) {
	for _, tc := range componentCases {
		t.Run(tc.name, func(t *testing.T) {
			res := renderTest(t, tc.components, tc.data)
			wantContains(t, "text", res.Text, tc.text...)
			wantContains(t, "html", res.HTML, tc.html...)
			wantLacks(t, "text", res.Text, tc.notText...)
			wantLacks(t, "html", res.HTML, tc.notHTML...)
			wantLacks(t, "html", res.HTML, "<script", "<form", "${")
			wellFormed(t, res.HTML)
			have := map[string]bool{}
			for _, s := range res.Texts {
				have[s] = true
			}
			for _, s := range tc.texts {
				if !have[s] {
					t.Errorf("Texts lacks %q: %q", s, res.Texts)
				}
			}
		})
	}
}

// TestCatalogCoverage reads the catalog and fails when a component or
// function it defines has no test case here.
func TestCatalogCoverage(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "basic_catalog_v0_9.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Components map[string]json.RawMessage `json:"components"`
		Functions  map[string]json.RawMessage `json:"functions"`
	}
	if err := json.Unmarshal(raw, &cat); err != nil {
		t.Fatal(err)
	}
	if len(cat.Components) != 18 || len(cat.Functions) != 14 {
		t.Fatalf("catalog has %d components and %d functions; the tests were written for 18 and 14", len(cat.Components), len(cat.Functions))
	}
	covered := map[string]bool{}
	for _, tc := range componentCases {
		covered[tc.name] = true
	}
	for name := range cat.Components {
		if !covered[name] {
			t.Errorf("catalog component %s has no case in componentCases", name)
		}
	}
	fcovered := map[string]bool{}
	for _, tc := range functionCases {
		fcovered[strings.SplitN(tc.name, "/", 2)[0]] = true
	}
	for name := range cat.Functions {
		if !fcovered[name] {
			t.Errorf("catalog function %s has no case in functionCases", name)
		}
	}
}

func TestThemeWeightsAndLongText(t *testing.T) {
	in := `{"createSurface":{"surfaceId":"s","catalogId":"https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json","theme":{"primaryColor":"#AA3300","agentDisplayName":"Travel agent"}},
	 "updateComponents":{"surfaceId":"s","components":[
	  {"id":"root","component":"Column","children":["r","notes","go"]},
	  {"id":"r","component":"Row","children":["a","b"]},
	  {"id":"a","component":"Text","text":"Wide","weight":3},
	  {"id":"b","component":"Text","text":{"literalString":"Narrow"},"weight":1},
	  {"id":"notes","component":"TextField","label":"Notes","variant":"longText","value":"Line one\nLine two"},
	  {"id":"go","component":"Button","child":"gl","action":{"functionCall":{"call":"openUrl","args":{"url":"mailto:desk@example.com"}}}},
	  {"id":"gl","component":"Text","text":"Write to us"}]}}`
	res := Render(json.RawMessage(in), goldenOptions())
	wantContains(t, "text", res.Text, "From Travel agent", "Wide  Narrow", "Notes:\n  Line one\n  Line two", "Write to us: mailto:desk@example.com")
	wantContains(t, "html", res.HTML, "From Travel agent", `width="75%"`, `width="25%"`, "Line one<br>Line two", `<a href="mailto:desk@example.com"`, "background:#AA3300")
	if len(res.Warnings) > 0 {
		t.Errorf("warnings: %q", res.Warnings)
	}
}

func TestOptionsTimeZoneAndLocale(t *testing.T) {
	comps := `[{"id":"root","component":"Column","children":["d","p"]},
	 {"id":"d","component":"DateTimeInput","label":"Departs","value":"2026-08-15T06:15:00Z","enableDate":true,"enableTime":true},
	 {"id":"p","component":"Text","text":{"call":"formatCurrency","args":{"value":1234.5,"currency":"EUR"},"returnType":"string"}}]`
	opt := goldenOptions()
	loc, err := time.LoadLocation("Europe/Athens")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	opt.TimeZone, opt.Locale = loc, "fr-FR"
	res := Render(surfaceJSON(t, comps, ""), opt)
	wantContains(t, "text", res.Text, "Departs: 15 août 2026 09:15", "1\u202f234,50\u00a0€")
}
