package config

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// OrganisationConfig names the organisation on whose behalf beachd asks:
// the approval page says who asks with it ("Acme Travel asks for your
// approval"). Unset, the page says so in neutral words, never with an
// agent's or a handler's internal name.
type OrganisationConfig struct {
	Name string `yaml:"name"`
}

// maxOrganisationName bounds organisation.name, in characters.
const maxOrganisationName = 100

func (o OrganisationConfig) validate(v *validator) {
	n := o.Name
	switch {
	case n == "":
	case strings.TrimSpace(n) == "":
		v.errorf("organisation.name", "is only white space; leave it out for the neutral wording")
	case !utf8.ValidString(n):
		v.errorf("organisation.name", "is not valid UTF-8")
	case utf8.RuneCountInString(n) > maxOrganisationName:
		v.errorf("organisation.name", "at most %d characters, got %d", maxOrganisationName, utf8.RuneCountInString(n))
	case strings.IndexFunc(n, unicode.IsControl) >= 0:
		v.errorf("organisation.name", "must be one line without control characters")
	}
}
