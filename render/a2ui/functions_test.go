package a2ui

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

type functionCase struct {
	name     string // "function/what"
	expr     string // a dynamic value, JSON
	data     string
	locale   string
	tz       string
	want     any // string or bool
	wantWarn string
}

var functionCases = []functionCase{
	// formatString
	{name: "formatString/absolute path", expr: `{"call":"formatString","args":{"value":"${/temp}° in ${/city}"},"returnType":"string"}`, data: `{"temp":72,"city":"Austin"}`, want: "72° in Austin"},
	{name: "formatString/nested calls", expr: `{"call":"formatString","args":{"value":"(${formatNumber(value: ${/n})} ${pluralize(value: ${/n}, one: 'review', other: 'reviews')})"},"returnType":"string"}`, data: `{"n":2847}`, want: "(2,847 reviews)"},
	{name: "formatString/positional args", expr: `{"call":"formatString","args":{"value":"${formatDate(${/d}, 'yyyy-MM-dd')}"}}`, data: `{"d":"2026-08-15T08:45:00Z"}`, want: "2026-08-15"},
	{name: "formatString/escaped", expr: `{"call":"formatString","args":{"value":"price \\${/x} is ${/x}"}}`, data: `{"x":5}`, want: "price ${/x} is 5"},
	{name: "formatString/object as JSON", expr: `{"call":"formatString","args":{"value":"${/o}"}}`, data: `{"o":{"a":1}}`, want: `{"a":1}`},
	{name: "formatString/missing path", expr: `{"call":"formatString","args":{"value":"[${/nope}]"}}`, data: `{}`, want: "[]", wantWarn: "no data at /nope"},
	{name: "formatString/malformed", expr: `{"call":"formatString","args":{"value":"a ${formatNumber(value: 1"}}`, want: "a ${formatNumber(value: 1", wantWarn: "cannot read the expression"},
	{name: "formatString/now", expr: `{"call":"formatString","args":{"value":"${formatDate(value: ${now()}, format: 'd MMM')}"}}`, want: "15 Dec"},
	// formatNumber
	{name: "formatNumber/default", expr: `{"call":"formatNumber","args":{"value":1234567.891}}`, want: "1,234,567.891"},
	{name: "formatNumber/decimals", expr: `{"call":"formatNumber","args":{"value":{"path":"/n"},"decimals":2}}`, data: `{"n":1234.5}`, want: "1,234.50"},
	{name: "formatNumber/no grouping", expr: `{"call":"formatNumber","args":{"value":1234.5,"grouping":false}}`, want: "1234.5"},
	{name: "formatNumber/negative", expr: `{"call":"formatNumber","args":{"value":-0.125,"decimals":1}}`, want: "-0.1"},
	{name: "formatNumber/german", expr: `{"call":"formatNumber","args":{"value":1234.5,"decimals":2}}`, locale: "de-DE", want: "1.234,50"},
	{name: "formatNumber/string number", expr: `{"call":"formatNumber","args":{"value":"12400"}}`, want: "12,400"},
	{name: "formatNumber/not a number", expr: `{"call":"formatNumber","args":{"value":"lots"}}`, want: "lots", wantWarn: "not a number"},
	// formatCurrency
	{name: "formatCurrency/usd", expr: `{"call":"formatCurrency","args":{"value":1188,"currency":"USD"}}`, want: "$1,188.00"},
	{name: "formatCurrency/gbp negative", expr: `{"call":"formatCurrency","args":{"value":-94.5,"currency":"gbp"}}`, want: "-£94.50"},
	{name: "formatCurrency/jpy", expr: `{"call":"formatCurrency","args":{"value":1234.6,"currency":"JPY"}}`, want: "¥1,235"},
	{name: "formatCurrency/euro german", expr: `{"call":"formatCurrency","args":{"value":1234.5,"currency":"EUR"}}`, locale: "de", want: "1.234,50\u00a0€"},
	{name: "formatCurrency/unknown code", expr: `{"call":"formatCurrency","args":{"value":5,"currency":"CHF","decimals":0}}`, want: "CHF\u00a05"},
	// formatDate
	{name: "formatDate/long", expr: `{"call":"formatDate","args":{"value":"2026-08-15T08:45:00Z","format":"EEEE, d MMMM yyyy 'at' HH:mm"}}`, want: "Saturday, 15 August 2026 at 08:45"},
	{name: "formatDate/12h", expr: `{"call":"formatDate","args":{"value":{"path":"/t"},"format":"h:mm a"}}`, data: `{"t":"2025-12-15T14:30:00Z"}`, want: "2:30 PM"},
	{name: "formatDate/time zone", expr: `{"call":"formatDate","args":{"value":"2025-12-15T14:30:00Z","format":"E, MMM d HH:mm z"}}`, tz: "America/New_York", want: "Mon, Dec 15 09:30 EST"},
	{name: "formatDate/date only stays put", expr: `{"call":"formatDate","args":{"value":"2025-12-28","format":"EEEE d"}}`, tz: "America/Los_Angeles", want: "Sunday 28"},
	{name: "formatDate/epoch millis", expr: `{"call":"formatDate","args":{"value":0,"format":"yyyy-MM-dd HH:mm:ss"}}`, want: "1970-01-01 00:00:00"},
	{name: "formatDate/short year and quote", expr: `{"call":"formatDate","args":{"value":"2026-01-05T00:00:00Z","format":"dd/MM/yy 'o''clock'"}}`, want: "05/01/26 o'clock"},
	{name: "formatDate/german names", expr: `{"call":"formatDate","args":{"value":"2026-03-15T08:45:00Z","format":"EEEE, d. MMMM yyyy (EEE, MMM)"}}`, locale: "de-AT", want: "Sonntag, 15. März 2026 (So., März)"},
	{name: "formatDate/bad date", expr: `{"call":"formatDate","args":{"value":"next Tuesday","format":"d MMM"}}`, want: "next Tuesday", wantWarn: "cannot read"},
	// pluralize
	{name: "pluralize/one", expr: `{"call":"pluralize","args":{"value":1,"one":"item","other":"items"}}`, want: "item"},
	{name: "pluralize/other", expr: `{"call":"pluralize","args":{"value":{"path":"/n"},"one":"item","other":"items"}}`, data: `{"n":3}`, want: "items"},
	{name: "pluralize/zero", expr: `{"call":"pluralize","args":{"value":0,"zero":"nothing","one":"item","other":"items"}}`, want: "nothing"},
	{name: "pluralize/russian few", expr: `{"call":"pluralize","args":{"value":3,"one":"файл","few":"файла","many":"файлов","other":"файла"}}`, locale: "ru", want: "файла"},
	{name: "pluralize/russian many", expr: `{"call":"pluralize","args":{"value":11,"one":"файл","few":"файла","many":"файлов","other":"файла"}}`, locale: "ru", want: "файлов"},
	// validation and logic
	{name: "required/empty", expr: `{"call":"required","args":{"value":{"path":"/e"}}}`, data: `{"e":""}`, want: false},
	{name: "required/present", expr: `{"call":"required","args":{"value":{"path":"/e"}}}`, data: `{"e":"x"}`, want: true},
	{name: "regex/match", expr: `{"call":"regex","args":{"value":"12345","pattern":"^[0-9]{5}$"}}`, want: true},
	{name: "regex/no match", expr: `{"call":"regex","args":{"value":"1234","pattern":"^[0-9]{5}$"}}`, want: false},
	{name: "regex/bad pattern", expr: `{"call":"regex","args":{"value":"x","pattern":"(("}}`, want: false, wantWarn: "regex"},
	{name: "length/min", expr: `{"call":"length","args":{"value":"pässwörd","min":8}}`, want: true},
	{name: "length/too short", expr: `{"call":"length","args":{"value":"short","min":8}}`, want: false},
	{name: "length/max", expr: `{"call":"length","args":{"value":"toolong","max":3}}`, want: false},
	{name: "numeric/in range", expr: `{"call":"numeric","args":{"value":{"path":"/age"},"min":18,"max":130}}`, data: `{"age":42}`, want: true},
	{name: "numeric/below", expr: `{"call":"numeric","args":{"value":"17","min":18}}`, want: false},
	{name: "email/valid", expr: `{"call":"email","args":{"value":"ada@example.com"}}`, want: true},
	{name: "email/invalid", expr: `{"call":"email","args":{"value":"ada@"}}`, want: false},
	{name: "and/both", expr: `{"call":"and","args":{"values":[true,{"call":"email","args":{"value":"a@b.co"}}]}}`, want: true},
	{name: "and/one false", expr: `{"call":"and","args":{"values":[true,{"path":"/f"}]}}`, data: `{"f":false}`, want: false},
	{name: "or/one true", expr: `{"call":"or","args":{"values":[false,{"path":"/t"}]}}`, data: `{"t":true}`, want: true},
	{name: "or/none", expr: `{"call":"or","args":{"values":[false,false]}}`, want: false},
	{name: "not/true", expr: `{"call":"not","args":{"value":true}}`, want: false},
	{name: "not/logic expression", expr: `{"not":{"and":[{"true":true},{"false":false}]}}`, want: true},
	{name: "openUrl/has no value", expr: `{"call":"openUrl","args":{"url":"https://example.com"}}`, want: ""},
	{name: "unknown/function", expr: `{"call":"frobnicate","args":{}}`, want: "", wantWarn: `unknown function "frobnicate"`},
}

func evalExpr(t *testing.T, expr, data string, opt Options) (any, []string) {
	t.Helper()
	r := newRenderer(opt)
	decode := func(s string) any {
		if s == "" {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(s)))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("test JSON %s: %v", s, err)
		}
		return v
	}
	ev := &evaluator{r: r, sid: "s", data: decode(data)}
	return ev.value(decode(expr), ""), r.warnings
}

func TestFunctions(t *testing.T) {
	for _, tc := range functionCases {
		t.Run(tc.name, func(t *testing.T) {
			opt := goldenOptions()
			if tc.locale != "" {
				opt.Locale = tc.locale
			}
			if tc.tz != "" {
				loc, err := time.LoadLocation(tc.tz)
				if err != nil {
					t.Skipf("time zone database lacks %s: %v", tc.tz, err)
				}
				opt.TimeZone = loc
			}
			got, warns := evalExpr(t, tc.expr, tc.data, opt)
			switch want := tc.want.(type) {
			case bool:
				if b, ok := got.(bool); !ok || b != want {
					t.Errorf("got %#v, want %v", got, want)
				}
			case string:
				if s := toString(got); s != want {
					t.Errorf("got %q, want %q", s, want)
				}
			}
			if tc.wantWarn == "" && len(warns) > 0 {
				t.Errorf("unexpected warnings: %q", warns)
			}
			if tc.wantWarn != "" && !strings.Contains(strings.Join(warns, "\n"), tc.wantWarn) {
				t.Errorf("warnings %q lack %q", warns, tc.wantWarn)
			}
		})
	}
}

// TestFunctionsInSurface checks a function result reaches both renditions,
// inside a list template with relative paths.
func TestFunctionsInSurface(t *testing.T) {
	res := renderTest(t,
		`[{"id":"root","component":"Column","children":{"componentId":"row","path":"/flights"}},
		  {"id":"row","component":"Text","text":{"call":"formatString","args":{"value":"${flightNumber}: ${formatCurrency(value: ${pricePerPerson}, currency: ${currency})} on ${formatDate(value: ${departure}, format: 'd MMM yyyy HH:mm')}"},"returnType":"string"}}]`,
		`{"flights":[{"flightNumber":"BA 2043","departure":"2026-08-15T08:45:00","pricePerPerson":187,"currency":"GBP"},{"flightNumber":"EJ 4521","departure":"2026-08-15T06:15:00","pricePerPerson":94,"currency":"GBP"}]}`)
	wantContains(t, "text", res.Text, "BA 2043: £187.00 on 15 Aug 2026 08:45", "EJ 4521: £94.00 on 15 Aug 2026 06:15")
	wantContains(t, "html", res.HTML, "BA 2043: £187.00 on 15 Aug 2026 08:45")
	if len(res.Warnings) > 0 {
		t.Errorf("warnings: %q", res.Warnings)
	}
}
