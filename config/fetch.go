package config

import (
	"fmt"

	"github.com/cool-ai/beachd/channels/fetch"
)

// FetchConfig is the `fetch:` section: what content may make beachd fetch
// from besides the public internet. Artifact URLs in an envelope are
// fetched to attach them to mail; by default loopback, private,
// link-local (cloud metadata), CGNAT, multicast and other non-public
// addresses are refused, checked when dialling (channels/fetch).
//
//	fetch:
//	  allow:
//	    - files.internal.example   # a host name, exact: dialled whatever it resolves to
//	    - 10.8.0.0/16              # a network (CIDR) or a single IP address
type FetchConfig struct {
	Allow []string `yaml:"allow"`
}

func (c *FetchConfig) validate(v *validator) {
	if len(c.Allow) > fetch.MaxAllowEntries {
		v.errorf("fetch.allow", "%d entries, at most %d", len(c.Allow), fetch.MaxAllowEntries)
		return
	}
	for i, e := range c.Allow {
		if err := fetch.CheckAllowEntry(e); err != nil {
			v.errorf(fmt.Sprintf("fetch.allow[%d]", i), "%v", err)
		}
	}
}
