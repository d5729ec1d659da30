package approvals

import (
	"testing"
	"time"
)

func TestArgRows(t *testing.T) {
	rows := ArgRows(map[string]any{"flight_number": "BA2043", "totalAmount": 1122.5, "currency": "gbp",
		"passengers": float64(6), "deposit": map[string]any{"amount": float64(50), "currency": "EUR"}, "refundable": false, "seats": []any{"12A", "12B"}, "hotel": map[string]any{"name": "Corfu Palace", "nights": float64(3)}})
	want := map[string]ArgRow{
		"Flight number": {Name: "Flight number", Value: "BA2043"},
		"Total amount":  {Name: "Total amount", Value: "GBP 1,122.50", Amount: true},
		"Passengers":    {Name: "Passengers", Value: "6"},
		"Refundable":    {Name: "Refundable", Value: "no"},
		"Seats":         {Name: "Seats", Value: "12A, 12B"},
		"Hotel":         {Name: "Hotel", Value: "Name: Corfu Palace; Nights: 3"},
		"Currency":      {Name: "Currency", Value: "gbp"},
		"Deposit":       {Name: "Deposit", Value: "EUR 50.00", Amount: true},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	for _, r := range rows {
		if want[r.Name] != r {
			t.Errorf("row %+v, want %+v", r, want[r.Name])
		}
	}
	for n, s := range map[float64]string{0: "0.00", 999.999: "1,000.00", 1234567.891: "1,234,567.89", -5: "−5.00"} {
		if got := formatAmount(n, ""); got != s {
			t.Errorf("formatAmount(%v) = %q, want %q", n, got, s)
		}
	}
	many := map[string]any{}
	for i := range 30 {
		many[string(rune('a'+i%26))+string(rune('a'+i/26))] = "x"
	}
	if rows := ArgRows(many); len(rows) != maxArgRows+1 || rows[maxArgRows].Value != "10 more" {
		t.Errorf("30 args: %d rows, last %+v", len(rows), rows[len(rows)-1])
	}
}

func TestTimeLeft(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second: "less than a minute", time.Minute: "1 minute", 12 * time.Minute: "12 minutes",
		time.Hour: "1 hour", 3*time.Hour + 20*time.Minute: "3 hours 20 minutes", 30 * time.Hour: "30 hours",
		72 * time.Hour: "3 days",
	} {
		if got := TimeLeft(d); got != want {
			t.Errorf("TimeLeft(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestPlainText(t *testing.T) {
	got := plainText("I'm ready to book **British Airways BA2043** — see [the fare](https://x.example/f?a=1) and `code`.")
	if want := "I'm ready to book British Airways BA2043 — see the fare and code."; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
