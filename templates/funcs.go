package templates

import (
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
	"unicode/utf8"
)

// Functions available to every template, besides the built-ins:
//
//	trunc N S    S cut to at most N characters, with "…" when cut
//	join SEP L   the strings of L joined by SEP
//	upper S, lower S
//	default D S  S, or D when S is empty
func funcs() map[string]any {
	return map[string]any{
		"trunc": func(n int, s string) string {
			if n < 1 || utf8.RuneCountInString(s) <= n {
				return s
			}
			r := []rune(s)
			return string(r[:n-1]) + "…"
		},
		"join":  func(sep string, l []string) string { return strings.Join(l, sep) },
		"upper": strings.ToUpper,
		"lower": strings.ToLower,
		"default": func(d, s string) string {
			if strings.TrimSpace(s) == "" {
				return d
			}
			return s
		},
	}
}

func textFuncs() texttemplate.FuncMap { return funcs() }
func htmlFuncs() htmltemplate.FuncMap { return funcs() }

// Funcs returns the functions every template gets, for other text templates
// beachd evaluates (WhatsApp content-template variables).
func Funcs() map[string]any { return funcs() }
