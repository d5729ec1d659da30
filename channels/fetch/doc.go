// Package fetch is the guarded HTTP client for every fetch whose address
// comes from content: artifact URLs that the email channel attaches, and
// media that inbound messages point at. An envelope is written by an agent,
// and an agent can be wrong or compromised, so such an address must never
// reach beachd's own network: its loopback listeners (the API, /metrics,
// the dev pages), the cloud metadata service, or hosts on a private
// network.
//
// The contract, which Client keeps for the first request and for every
// redirect:
//
//   - only http and https URLs, with a host, and without user-info
//     ("user:pw@host" is refused, never sent on as Basic auth);
//   - the address is checked when dialling, after name resolution, for
//     every IP tried (net.Dialer.Control), so neither a DNS answer nor a
//     redirect can reach a refused address. Refused unless allowed:
//     loopback, unspecified, 0.0.0.0/8, private (RFC 1918, RFC 4193
//     fc00::/7), link-local (169.254.0.0/16, fe80::/10), CGNAT
//     (100.64.0.0/10), multicast, broadcast and reserved (240.0.0.0/4),
//     IETF protocol, documentation and benchmark ranges, site-local
//     fec0::/10, discard-only 100::/64, and any IPv6 address outside
//     2000::/3. IPv4 inside IPv6 (IPv4-mapped ::ffff:0:0/96, NAT64
//     64:ff9b::/96, 6to4 2002::/16) is judged by the IPv4 address it
//     carries; IPv4-compatible ::/96, the local-use NAT64 prefix
//     64:ff9b:1::/48 and Teredo 2001::/32 are refused;
//   - an operator may allow hosts (exact names, matched before resolution:
//     whatever they resolve to is dialled) and networks (CIDR prefixes or
//     single IPs) with Config.Allow; nothing else weakens the rules;
//   - at most Config.MaxRedirects (default 3) redirects;
//   - no proxy from the environment (a proxy would dial for us, unchecked);
//   - a time bound for the whole exchange (Config.Timeout) and a size bound
//     on headers and body (Config.MaxBytes: a body read past it fails with
//     ErrTooLarge).
//
// Every refusal wraps ErrRefused and says why, for the operator's log. A
// caller that shows the outcome to a message's recipient must not show the
// cause: what failed where is a map of the network behind beachd (which
// ports answer, which hosts exist). The email channel turns every failed
// fetch into one uniform note.
//
// Provider APIs (Twilio's host, the configured SMTP server, webhook
// endpoints) are configuration, not content, and keep their own clients.
//
// Agents are configuration too, but what beachd sends them — credentials
// in configured headers, approval decisions — must reach the configured
// endpoint and nothing else. EndpointClient is their client: it follows
// no redirect (a 3xx is the caller's failure to report), dials the
// configured host:port whatever it resolves to, and any other host:port
// only at an address Client would dial (same rules, checked after
// resolution), with no proxy from the environment.
package fetch
