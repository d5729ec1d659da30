package email

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keptInOrder reports whether every line of out is, in order, a prefix of a
// line of in (TrimReply only drops lines and cuts a reply off an
// attribution on the same line; it never writes text of its own).
func keptInOrder(in, out string) bool {
	if out == "" {
		return true
	}
	in = strings.ReplaceAll(in, "\r\n", "\n")
	in = strings.ReplaceAll(in, "\r", "\n")
	src := strings.Split(in, "\n")
	j := 0
	for _, o := range strings.Split(out, "\n") {
		if o == "" {
			continue
		}
		for ; j < len(src); j++ {
			s := strings.ReplaceAll(src[j], "\u00a0", " ")
			if strings.HasPrefix(s, o) {
				break
			}
		}
		if j == len(src) {
			return false
		}
		j++
	}
	return true
}

// onlyQuoted reports whether every non-blank line of s is a "> " line.
func onlyQuoted(s string) bool {
	s = strings.ReplaceAll(s, "\r", "\n")
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimLeft(l, " \t"), ">") {
			return false
		}
	}
	return true
}

func FuzzTrim(f *testing.F) {
	// A sample of the corpus as seeds (all of it makes the baseline run
	// eat a short -fuzztime).
	files, _ := filepath.Glob("testdata/replies/trim/*/*.in.txt")
	for i, p := range files {
		if b, err := os.ReadFile(p); err == nil && len(b) < 2048 && i%4 == 0 {
			f.Add(string(b))
		}
	}
	f.Add("Approve\n\nOn Mon, Jan 1, 2024 at 9:00 AM X <\nx@y> wrote:\n> hi")
	f.Add("> yes\n>\n> On 2024-01-01 10:00 GMT+01:00 A <a@b>:\n>> ok")
	f.Add("_____\nFrom: a\nSent: b\n\nyes")
	// The shapes of the rules for other languages, separators, client
	// lines, rules and dashed names, so the fuzzer starts at each.
	f.Add("Da.\n\nÎn lun., 15 ian. 2024 la 10:30, A <a@b.ro> a\nscris:\n> q")
	f.Add("نعم\n\nفي ١٥‏/٠١‏/٢٠٢٤، الساعة ١٠:٣٠ ص، كتب A <a@b.sa>:\n> q")
	f.Add("Ja\nAm 15.01.2024 um 10:30 schrieb A <a@b.de>\n> q")
	f.Add("ok\n-----Mesaj original-----De la: A <a@b.ro>\nTrimis: luni\n\nq")
	f.Add("ok\n-------- Oriģinālā ziņa --------\nNo: A\nDatums: 15.01.2024\n\nq")
	f.Add("yes\n\nTrimis de pe iPhone-ul meu\n\nOn 1 Jan 2024, A <a@b.c> wrote:\n> q")
	f.Add("yes\n\n--\u00a0\nA\n\n* * *\n. . . .\n—\n-A\n/B")
	f.Add("Title\n-----\nrow\nrow\n\n---\n\nA long sentence of prose follows the rule here.")
	f.Add("CAUTION: This email originated from outside of the organization.\n\nyes\n\nDisclaimer\n\nx")
	f.Fuzz(func(t *testing.T, in string) {
		if len(in) > 1<<16 {
			return
		}
		out := TrimReply(in)
		if len(out) > len(in) {
			t.Fatalf("output longer than input: %q -> %q", in, out)
		}
		if !keptInOrder(in, out) {
			t.Fatalf("output is not the input's lines in order: %q -> %q", in, out)
		}
		if onlyQuoted(in) && out != "" {
			t.Fatalf("a reply that is only quoted text kept %q", out)
		}
	})
}

// TestTrimQuoteNeverDecides: whatever the client's quoting looks like, text
// only someone else wrote trims to nothing, so a quoted "yes" cannot become
// the person's answer.
func TestTrimQuoteNeverDecides(t *testing.T) {
	for _, in := range []string{
		"> yes",
		"> Approve?\n>\n> yes\n",
		">> yes\n> \n",
		"On Mon, Jan 15, 2024 at 10:30 AM Agent <a@b.test> wrote:\n\nyes\n",
		"On Mon, Jan 15, 2024 at 10:30 AM Agent <a@b.test> wrote:\n> yes\n",
		"Am 15.01.2024 um 10:30 schrieb Agent <a@b.test>:\nJa\n",
		"2024-01-15 10:30 GMT+01:00 Agent <a@b.test>:\n\nyes\n",
		"-----Original Message-----\nyes\n",
		"________________________________\nFrom: Agent\nSent: Monday\nTo: Alice\n\nApprove\n",
		"From: Agent <a@b.test>\nSent: Monday, January 15, 2024\nTo: Alice\nSubject: x\n\nyes\n",
		"Von: Agent\nGesendet: Montag\nAn: Alice\nBetreff: x\n\nja\n",
		"---------- Forwarded message ---------\nFrom: Agent\nDate: today\n\nyes\n",
		"Begin forwarded message:\n\nyes\n",
		"-- \nyes\n",
		"Sent from my iPhone\nyes\n",
		"Richard> yes\n",
	} {
		if got := TrimReply(in); got != "" {
			t.Errorf("TrimReply(%q) = %q, want nothing", in, got)
		}
	}
}

// BenchmarkTrimReply runs each measured trimmer over the whole corpus.
func BenchmarkTrimReply(b *testing.B) {
	cases := loadTrimCorpus(b)
	var size int64
	for _, c := range cases {
		size += int64(len(c.in))
	}
	for _, name := range []string{"beachd TrimReply", "dimiro1/reply"} {
		trim := trimmers[name]
		b.Run(strings.ReplaceAll(name, " ", "_"), func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				for _, c := range cases {
					trim(c.in)
				}
			}
		})
	}
}
