package email

import (
	"flag"
	"fmt"
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

var showTrimMisses = flag.Bool("trim.misses", false, "print every corpus case the trimmer gets wrong")

// Floors for TrimReply on the corpus, set from the measurement (see
// TestTrimCorpus's log); a change that loses cases fails here.
const (
	trimExactFloor     = 0.98
	trimFirstLineFloor = 1.0
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
	names := make([]string, 0, len(trimmers))
	for n := range trimmers {
		names = append(names, n)
	}
	sort.Strings(names)
	n := float64(len(cases))
	for _, name := range names {
		s := scoreTrimmer(cases, trimmers[name])
		t.Logf("%-24s exact %3d/%d (%5.1f%%)  same lines %3d (%5.1f%%)  first line %3d (%5.1f%%)  quote-only replies left non-empty %d",
			name, s.exact, len(cases), 100*float64(s.exact)/n, s.lines, 100*float64(s.lines)/n, s.first, 100*float64(s.first)/n, s.leaks)
		if name != "beachd TrimReply" {
			continue
		}
		if *showTrimMisses {
			for _, m := range s.misses {
				t.Log(m)
			}
		}
		for _, src := range sources(cases) {
			sub := filterSource(cases, src)
			ss := scoreTrimmer(sub, TrimReply)
			t.Logf("  %-20s exact %3d/%d  same lines %3d  first line %3d", src, ss.exact, len(sub), ss.lines, ss.first)
		}
		if s.leaks > 0 {
			t.Errorf("TrimReply left text in %d replies that are only quoted text", s.leaks)
		}
		if float64(s.exact)/n < trimExactFloor || float64(s.first)/n < trimFirstLineFloor {
			t.Errorf("TrimReply fell below its floor (exact %.3f < %.3f or first line %.3f < %.3f); run with -trim.misses",
				float64(s.exact)/n, trimExactFloor, float64(s.first)/n, trimFirstLineFloor)
		}
	}
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
