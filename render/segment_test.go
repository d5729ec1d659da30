package render

import (
	"strings"
	"testing"
)

func TestMeasure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     string
		enc      string
		units    int
		segments int
	}{
		{"empty", "", GSM7, 0, 0},
		{"plain", "Hello", GSM7, 5, 1},
		{"160 GSM fits one", strings.Repeat("a", 160), GSM7, 160, 1},
		{"161 GSM needs two", strings.Repeat("a", 161), GSM7, 161, 2},
		{"306 GSM is two of 153", strings.Repeat("a", 306), GSM7, 306, 2},
		{"307 GSM is three", strings.Repeat("a", 307), GSM7, 307, 3},
		{"GSM specials stay GSM", "£¥èéùìòÇØøÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ¡ÄÖÑÜ§¿äöñüà@$", GSM7, 41, 1},
		{"extension costs two", "€[]{}", GSM7, 10, 1},
		{"80 euros is 160 septets", strings.Repeat("€", 80), GSM7, 160, 1},
		{"81 euros", strings.Repeat("€", 81), GSM7, 162, 2},
		// 152 plain + € would straddle the 153 boundary: € moves to the next segment.
		{"escape never split", strings.Repeat("a", 152) + "€" + strings.Repeat("a", 10), GSM7, 164, 2},
		{"one non-GSM switches all", strings.Repeat("a", 100) + "→", UCS2, 101, 2},
		{"70 UCS-2 fits one", strings.Repeat("ж", 70), UCS2, 70, 1},
		{"71 UCS-2 needs two", strings.Repeat("ж", 71), UCS2, 71, 2},
		{"134 UCS-2 is two of 67", strings.Repeat("ж", 134), UCS2, 134, 2},
		{"135 UCS-2 is three", strings.Repeat("ж", 135), UCS2, 135, 3},
		{"emoji count two units", "😊", UCS2, 2, 1},
		{"35 emoji fit one", strings.Repeat("😊", 35), UCS2, 70, 1},
		// 66 units + an emoji (2) would straddle 67: the emoji moves.
		{"surrogate pair never split", strings.Repeat("ж", 66) + "😊" + "ж", UCS2, 69, 1},
		{"surrogate pair at boundary", strings.Repeat("ж", 66) + "😊" + strings.Repeat("ж", 5), UCS2, 73, 2},
		{"Greek capitals in GSM", "ΔΦΓΛΩΠΨΣΘΞ", GSM7, 10, 1},
		{"Greek lower case is not", "καλημέρα", UCS2, 8, 1},
		{"curly quote is not GSM", "it’s", UCS2, 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc, units, segs := Measure(tc.body)
			if enc != tc.enc || units != tc.units || segs != tc.segments {
				t.Errorf("Measure = %s, %d units, %d segments; want %s, %d, %d", enc, units, segs, tc.enc, tc.units, tc.segments)
			}
		})
	}
}

func TestSMSNormalizeKeepsGSM(t *testing.T) {
	in := "It’s “ready” — 06:15–12:00… LGW→CFU\u00a0ok"
	out := smsNormalize(in)
	if enc, _, _ := Measure(out); enc != GSM7 {
		t.Errorf("normalised %q is still %s", out, enc)
	}
	if out != `It's "ready" - 06:15-12:00... LGW->CFU ok` {
		t.Errorf("normalised to %q", out)
	}
}

// FuzzMeasure checks the segmenter's invariants on any text: the encoding is
// GSM-7 exactly when every character is GSM, units match the sum of widths,
// and the segment count is the minimum greedy packing.
func FuzzMeasure(f *testing.F) {
	for _, s := range []string{"", "hello", strings.Repeat("€", 90), "Καλημέρα ✈️", strings.Repeat("a", 152) + "€", "😊😊😊", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc, units, segs := Measure(s)
		gsm := true
		for _, r := range s {
			if !isGSM(r) {
				gsm = false
			}
		}
		if (enc == GSM7) != gsm {
			t.Fatalf("encoding %s for %q", enc, s)
		}
		if units != smsUnits(s, enc) {
			t.Fatalf("units %d != %d", units, smsUnits(s, enc))
		}
		single, multi := 70, 67
		if enc == GSM7 {
			single, multi = 160, 153
		}
		switch {
		case units == 0 && segs != 0, units > 0 && segs < 1:
			t.Fatalf("%d units in %d segments", units, segs)
		case units > 0 && units <= single && segs != 1:
			t.Fatalf("%d units should be one segment, got %d", units, segs)
		case units > single && (segs < (units+multi-1)/multi || segs > units/(multi-1)+1):
			t.Fatalf("%d units in %d segments of %d", units, segs, multi)
		}
		// Splitting never loses text and respects the limit.
		if s != "" {
			for _, p := range splitSMS(s, enc, 200) {
				if smsUnits(p, enc) > 200 {
					t.Fatalf("part of %d units over the 200 limit", smsUnits(p, enc))
				}
			}
		}
	})
}
