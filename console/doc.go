// Package console is beachd's operator console, served at /ui/ by the same
// binary: server-rendered html/template pages, a stylesheet and one small
// script from an embed.FS (no build step), live figures by server-sent events
// with polling as the fallback.
//
// Who may use it. Signing in with an API key sets a session cookie
// (HttpOnly, SameSite=Strict, Secure when the public URL is https) that holds
// no key: it names the key by the first 8 hex digits of its SHA-256 and is
// signed with the console secret, so a key removed from the configuration
// ends its sessions. Every page also accepts the key as a bearer token, for
// tools. A read-only key sees everything and changes nothing: the pages show
// it no buttons, and its POSTs are refused 403.
//
// What protects a change. Every POST must carry the page's CSRF token (an
// HMAC of the session, or of the bearer key's id) and, when the browser sends
// one, an Origin of this host; the answer is 403 otherwise. Pages carry a
// Content-Security-Policy whose scripts need the page's nonce, no inline
// handlers, and frame-ancestors 'none'. A delivery's HTML rendition is shown
// in an iframe with sandbox="" from its own URL, whose policy allows no
// script and no fetch.
//
// The console changes nothing by itself: every action is one the API offers
// too (retry, bulk retry, decide, retry an injection, run a schedule, enable
// an endpoint, send a test event), made through the same services.
package console
