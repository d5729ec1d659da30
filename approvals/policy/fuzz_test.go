package policy

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzPolicyExpression: any expression either compiles or is refused with
// an *ExprError; a compiled one evaluated over any arguments matches,
// does not match, or fails, and a failure never matches.
func FuzzPolicyExpression(f *testing.F) {
	f.Add("double(args.amount) <= 200.0 && args.currency == 'GBP'", `{"amount": 120, "currency": "GBP"}`)
	f.Add("args.items.all(x, x > 1)", `{"items": [1, 2, "a"]}`)
	f.Add("now.getHours('Europe/London') < 18 || size(args) > 2", `{}`)
	f.Add("int(args.seats) <= 6", `{"seats": 1e300}`)
	f.Fuzz(func(t *testing.T, expr, args string) {
		if len(expr) > 512 || len(args) > 2048 {
			return
		}
		if _, err := Compile(expr); err != nil {
			if _, ok := err.(*ExprError); !ok {
				t.Fatalf("Compile(%q): %T %v, want an *ExprError", expr, err, err)
			}
			return
		}
		var a map[string]any
		if json.Unmarshal([]byte(args), &a) != nil {
			return
		}
		s, err := New([]Definition{{Name: "p", When: expr, Decide: DecideGranted}}, nil)
		if err != nil {
			t.Fatalf("New after Compile succeeded: %v", err)
		}
		s.Match("a", "t", a, time.Unix(0, 0))
	})
}
