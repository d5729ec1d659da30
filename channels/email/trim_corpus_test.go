package email

import (
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	discourse "github.com/dimiro1/reply"
)

// The trimming corpus: testdata/replies/trim/<source>/<case>.in.txt is the
// text of a reply as it arrives (<case>.in.html an HTML-only reply, turned
// into text the way ParseMessage does it, by htmlToText, before trimming),
// <case>.want.txt what a person reads as the reply.
// testdata/replies/trim/NOTICE names each source and its licence.

var (
	showTrimMisses    = flag.Bool("trim.misses", false, "print every tuning-set case the trimmer gets wrong")
	showHeldOutMisses = flag.Bool("trim.heldout-misses", false, "print every held-out case the trimmer gets wrong (look only to report: rules tuned on them no longer measure anything)")
)

// The corpus is split in two, by a rule fixed before any held-out case was
// scored: the tuning set, which the rules were written against, and the
// held-out set, which measures how the rules do on replies they were not
// written for. A case is held out when its source is in heldOutSources
// (every case of it), or when its source is in neither list and the FNV-1a
// hash of its name ("<source>/<case>") is divisible by 3. The sources the
// rules were written against before the split are tuning only.
var (
	tuningSources = map[string]bool{
		"beachd": true, "discourse": true, "email_reply_parser": true, "email_reply_trimmer": true,
		"talon": true, "talon_html": true, "talon_standard": true, "willdurand": true,
	}
	heldOutSources = map[string]bool{"mail_parser_reply": true}
)

// heldOut reports whether the corpus case name ("<source>/<case>") is in
// the held-out set.
func heldOut(name string) bool {
	src, _, _ := strings.Cut(name, "/")
	switch {
	case tuningSources[src]:
		return false
	case heldOutSources[src]:
		return true
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return h.Sum32()%3 == 0
}

// Floors for TrimReply on the corpus, set from the measurement (see
// TestTrimCorpus's log); a change that loses cases fails here.
const (
	trimTuningExactFloor  = 0.98
	trimHeldOutExactFloor = 0.94
	trimFirstLineFloor    = 1.0
)

type trimCase struct {
	name, in, want string
}

func loadTrimCorpus(t testing.TB) []trimCase {
	t.Helper()
	files, err := filepath.Glob("testdata/replies/trim/*/*.in.*")
	if err != nil {
		t.Fatal(err)
	}
	var cases []trimCase
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in := string(raw)
		base := strings.TrimSuffix(f, filepath.Ext(f))
		switch filepath.Ext(f) {
		case ".txt":
		case ".html":
			in = htmlToText(in, 1<<20)
		default:
			t.Fatalf("corpus file %s: want .in.txt or .in.html", f)
		}
		want, err := os.ReadFile(strings.TrimSuffix(base, ".in") + ".want.txt")
		if err != nil {
			t.Fatalf("case %s has no expectation: %v", f, err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.ToSlash(base), "testdata/replies/trim/"), ".in")
		cases = append(cases, trimCase{name: name, in: in, want: string(want)})
	}
	if len(cases) < 100 {
		t.Fatalf("trim corpus: %d cases, expected hundreds", len(cases))
	}
	return cases
}

// normSpace is the headline comparison: every run of white space (line
// breaks and blank lines included) counts as one space.
func normSpace(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\u00a0", " ")), " ")
}

// normTrim is the stricter one: the lines must be the same, only line
// endings, trailing spaces, non-breaking spaces, runs of blank lines and
// surrounding blank lines do not count.
func normTrim(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.ReplaceAll(s, "\u00a0", " ")
	var out []string
	blank := false
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, " \t")
		if strings.TrimSpace(l) == "" {
			blank = len(out) > 0
			continue
		}
		if blank {
			out = append(out, "")
		}
		blank = false
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// firstLine is the line that decides an approval: the first non-empty one.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

type trimScore struct {
	// exact: equal after normSpace; lines: equal after normTrim; first:
	// the same first non-empty line (what decides an approval).
	exact, lines, first int
	// leaks counts replies that are only quoted text (the expectation
	// is empty) that the trimmer left text in.
	leaks  int
	misses []string
}

func scoreTrimmer(cases []trimCase, trim func(string) string) trimScore {
	var s trimScore
	for _, c := range cases {
		raw := trim(c.in)
		got, want := normTrim(raw), normTrim(c.want)
		if normSpace(raw) == normSpace(c.want) {
			s.exact++
		}
		if got == want {
			s.lines++
		} else {
			s.misses = append(s.misses, fmt.Sprintf("%s:\n--- got ---\n%s\n--- want ---\n%s\n", c.name, got, want))
		}
		if firstLine(got) == firstLine(want) {
			s.first++
		}
		if want == "" && got != "" {
			s.leaks++
		}
	}
	return s
}

// trimmers are the candidates measured on the corpus. TrimReply is the one
// beachd uses; the others are there so the choice stays measured.
var trimmers = map[string]func(string) string{
	"beachd TrimReply":     TrimReply,
	"dimiro1/reply":        discourse.FromText,
	"reply then TrimReply": func(s string) string { return TrimReply(discourse.FromText(s)) },
	"TrimReply then reply": func(s string) string { return discourse.FromText(TrimReply(s)) },
}

func TestTrimCorpus(t *testing.T) {
	cases := loadTrimCorpus(t)
	var tuning, held []trimCase
	for _, c := range cases {
		if heldOut(c.name) {
			held = append(held, c)
		} else {
			tuning = append(tuning, c)
		}
	}
	names := make([]string, 0, len(trimmers))
	for n := range trimmers {
		names = append(names, n)
	}
	sort.Strings(names)
	// Each trimmer runs once on each case; the sets and sources below
	// are scored from these results.
	trimmed := map[string]func(string) string{}
	for _, name := range names {
		trimmed[name] = memoTrim(cases, trimmers[name])
		for _, set := range []struct {
			name  string
			cases []trimCase
		}{{"tuning", tuning}, {"held-out", held}, {"all", cases}} {
			s := scoreTrimmer(set.cases, trimmed[name])
			t.Logf("%-22s %-8s %s", name, set.name, s.line(len(set.cases)))
		}
	}

	trim := trimmed["beachd TrimReply"]
	st, sh := scoreTrimmer(tuning, trim), scoreTrimmer(held, trim)
	t.Log("beachd TrimReply by source (tuning | held-out):")
	for _, src := range sources(cases) {
		a, b := filterSource(tuning, src), filterSource(held, src)
		sa, sb := scoreTrimmer(a, trim), scoreTrimmer(b, trim)
		t.Logf("  %-20s %3d/%-3d | %3d/%-3d exact; first line %3d | %3d", src, sa.exact, len(a), sb.exact, len(b), sa.first, sb.first)
	}
	if *showTrimMisses {
		for _, m := range st.misses {
			t.Log(m)
		}
	}
	if *showHeldOutMisses {
		for _, m := range sh.misses {
			t.Log(m)
		}
	}
	if st.leaks+sh.leaks > 0 {
		t.Errorf("TrimReply left text in %d replies that are only quoted text", st.leaks+sh.leaks)
	}
	for _, f := range []struct {
		set          string
		s            trimScore
		n            int
		exact, first float64
	}{
		{"tuning", st, len(tuning), trimTuningExactFloor, trimFirstLineFloor},
		{"held-out", sh, len(held), trimHeldOutExactFloor, trimFirstLineFloor},
	} {
		n := float64(f.n)
		if float64(f.s.exact)/n < f.exact || float64(f.s.first)/n < f.first {
			t.Errorf("TrimReply fell below its floor on the %s set (exact %.3f < %.3f or first line %.3f < %.3f); run with -trim.misses",
				f.set, float64(f.s.exact)/n, f.exact, float64(f.s.first)/n, f.first)
		}
	}
}

// memoTrim runs trim once on each case's input and returns a function
// that answers from those results.
func memoTrim(cases []trimCase, trim func(string) string) func(string) string {
	out := make(map[string]string, len(cases))
	for _, c := range cases {
		if _, ok := out[c.in]; !ok {
			out[c.in] = trim(c.in)
		}
	}
	return func(in string) string {
		if o, ok := out[in]; ok {
			return o
		}
		return trim(in)
	}
}

// line is one row of TestTrimCorpus's log.
func (s trimScore) line(n int) string {
	pct := func(k int) float64 { return 100 * float64(k) / float64(n) }
	return fmt.Sprintf("exact %3d/%d (%5.1f%%)  same lines %3d (%5.1f%%)  first line %3d (%5.1f%%)  quote-only left non-empty %d",
		s.exact, n, pct(s.exact), s.lines, pct(s.lines), s.first, pct(s.first), s.leaks)
}

func sources(cases []trimCase) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range cases {
		src, _, _ := strings.Cut(c.name, "/")
		if !seen[src] {
			seen[src] = true
			out = append(out, src)
		}
	}
	sort.Strings(out)
	return out
}

func filterSource(cases []trimCase, src string) []trimCase {
	var out []trimCase
	for _, c := range cases {
		if strings.HasPrefix(c.name, src+"/") {
			out = append(out, c)
		}
	}
	return out
}
