package policy

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestCompileErrorsNameLineAndColumn(t *testing.T) {
	cases := []struct {
		expr       string
		line, col  int
		wantReason string
	}{
		{"args.amount <= 200 &&\n  nosuch > 1", 2, 3, "undeclared reference to 'nosuch'"},
		{"args.amount <=", 1, 15, "Syntax error"},
		{"'a' + 1", 1, 5, "no matching overload"},
		{"agent", 0, 0, "must be true or false"},
	}
	for _, c := range cases {
		_, err := Compile(c.expr)
		var ee *ExprError
		if !errors.As(err, &ee) {
			t.Fatalf("%q: err = %v, want an *ExprError", c.expr, err)
		}
		if ee.Line != c.line || ee.Column != c.col || !strings.Contains(ee.Reason, c.wantReason) {
			t.Errorf("%q: got line %d column %d %q; want line %d column %d containing %q", c.expr, ee.Line, ee.Column, ee.Reason, c.line, c.col, c.wantReason)
		}
	}
	if _, err := Compile(strings.Repeat("true && ", MaxExpression/8+1) + "true"); err == nil {
		t.Error("an over-long expression compiled")
	}
	for _, ok := range []string{"double(args.amount) <= 200.0 && args.currency == 'GBP'", "args.vip", "now.getHours() < 25 && tool == 'x' && agent != ''"} {
		if _, err := Compile(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

func TestMatchFirstFitting(t *testing.T) {
	var logs bytes.Buffer
	s, err := New([]Definition{
		{Name: "broken", Agent: "travel", Tool: "book_flight", When: "args.missing.deeper == 1", Decide: DecideGranted},
		{Name: "small", Agent: "travel", Tool: "book_flight", When: "double(args.amount) <= 200.0 && args.currency == 'GBP'", Decide: DecideGranted},
		{Name: "large", Agent: "travel", Tool: "book_flight", Quorum: 2},
		{Name: "any-tool", Agent: "ops"},
	}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	name := func(p *Policy) string {
		if p == nil {
			return ""
		}
		return p.Name
	}
	cases := []struct {
		agent, tool string
		args        map[string]any
		want        string
	}{
		{"travel", "book_flight", map[string]any{"amount": 150.0, "currency": "GBP"}, "small"},
		{"travel", "book_flight", map[string]any{"amount": float64(150), "currency": "EUR"}, "large"},
		{"travel", "book_flight", map[string]any{"amount": 5000.0, "currency": "GBP"}, "large"},
		{"travel", "book_flight", map[string]any{"amount": "not a number", "currency": "GBP"}, "large"}, // run-time error: no match
		{"travel", "book_flight", nil, "large"},
		{"travel", "cancel", nil, ""},
		{"other", "book_flight", map[string]any{"amount": 1.0, "currency": "GBP"}, ""},
		{"ops", "restart", nil, "any-tool"},
	}
	for _, c := range cases {
		if got := name(s.Match(c.agent, c.tool, c.args, now)); got != c.want {
			t.Errorf("Match(%s, %s, %v) = %q, want %q", c.agent, c.tool, c.args, got, c.want)
		}
	}
	if n := strings.Count(logs.String(), "policy=broken"); n != 1 {
		t.Errorf("the failing expression was logged %d times, want once:\n%s", n, logs.String())
	}
	if s.Policy("large").Quorum != 2 || !s.Policy("large").HasEnvelopeStep() {
		t.Errorf("large: %+v: want quorum 2 and the default step to: envelope", s.Policy("large"))
	}
}

func TestCostLimitDoesNotMatch(t *testing.T) {
	s, err := New([]Definition{{Name: "costly", When: "args.items.all(x, args.items.all(y, args.items.all(z, x + y + z >= 0)))", Decide: DecideGranted}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 200)
	for i := range items {
		items[i] = float64(i)
	}
	if p := s.Match("a", "t", map[string]any{"items": items}, time.Now()); p != nil {
		t.Fatal("an expression over its cost limit matched")
	}
	if p := s.Match("a", "t", map[string]any{"items": items[:3]}, time.Now()); p == nil {
		t.Fatal("the same expression within its cost limit did not match")
	}
}

func TestQuietHoursDefer(t *testing.T) {
	q, errs := ParseQuietHours("Europe/London", "21:00", "08:00")
	if errs != nil {
		t.Fatal(errs)
	}
	lon, _ := time.LoadLocation("Europe/London")
	at := func(d, h, m int) time.Time { return time.Date(2026, 7, d, h, m, 0, 0, lon) }
	cases := []struct{ in, want time.Time }{
		{at(10, 12, 0), at(10, 12, 0)},
		{at(10, 20, 59), at(10, 20, 59)},
		{at(10, 21, 0), at(11, 8, 0)},
		{at(10, 23, 30), at(11, 8, 0)},
		{at(11, 3, 0), at(11, 8, 0)},
		{at(11, 8, 0), at(11, 8, 0)},
	}
	for _, c := range cases {
		if got := q.Defer(c.in); !got.Equal(c.want) {
			t.Errorf("Defer(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	day, _ := ParseQuietHours("UTC", "12:00", "13:30")
	if got := day.Defer(time.Date(2026, 1, 1, 12, 10, 0, 0, time.UTC)); !got.Equal(time.Date(2026, 1, 1, 13, 30, 0, 0, time.UTC)) {
		t.Errorf("a window within a day: %s", got)
	}
	for _, bad := range [][3]string{{"Mars/Olympus", "21:00", "08:00"}, {"UTC", "25:00", "08:00"}, {"UTC", "8", "09:00"}, {"UTC", "09:00", "09:00"}, {"", "09:00", "10:00"}} {
		if _, errs := ParseQuietHours(bad[0], bad[1], bad[2]); errs == nil {
			t.Errorf("ParseQuietHours%v accepted", bad)
		}
	}
}
