package api

import (
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

func (h conversationHandlers) listInbound(w http.ResponseWriter, r *http.Request) {
	q, err := ParseInboundQuery(r.URL.Query(), h.agents)
	if err != nil {
		WriteError(w, h.log, err)
		return
	}
	items, next, err := h.conv.ListInbound(r.Context(), q)
	if err != nil {
		WriteError(w, h.log, err)
		return
	}
	if items == nil {
		items = []InboundItem{}
	}
	out := map[string]any{"inbound": items}
	if next != "" {
		out["next"] = next
	}
	WriteJSON(w, http.StatusOK, out)
}

// maxAttachmentIndex bounds n in /v1/inbound/{id}/attachments/{n}.
const maxAttachmentIndex = 1000

// attachment serves the bytes of an inbound attachment to whoever holds a
// signed URL (the agent that was handed it in a turn). Anything wrong with
// the URL's credential — a missing, malformed, wrong or expired signature —
// is the same 403, so the answer says nothing about which.
func (h conversationHandlers) attachment(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	forbidden := func() { WriteError(w, h.log, ErrBadSignature) }
	q := r.URL.Query()
	expires, sig := q.Get("expires"), q.Get("sig")
	if len(q["expires"]) != 1 || len(q["sig"]) != 1 || len(expires) > 20 || len(sig) > 128 || sig == "" || !printableASCII(sig) {
		forbidden()
		return
	}
	if _, err := strconv.ParseInt(expires, 10, 64); err != nil {
		forbidden()
		return
	}
	id := r.PathValue("id")
	n, err := strconv.Atoi(r.PathValue("n"))
	if !ValidID(id, "inb_") || err != nil || n < 0 || n > maxAttachmentIndex {
		forbidden()
		return
	}
	name, mediaType, data, err := h.conv.OpenAttachment(r.Context(), id, n, expires, sig)
	if err != nil {
		WriteError(w, h.log, err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", safeMediaType(mediaType))
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": SanitizeFilename(name)}))
	// Opened in a browser anyway, the file may run nothing and load nothing.
	hd.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	hd.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
}

// safeMediaType is the stored media type when it parses as one, without
// parameters other than charset; else application/octet-stream.
func safeMediaType(s string) string {
	mt, params, err := mime.ParseMediaType(s)
	if err != nil || !strings.Contains(mt, "/") {
		return "application/octet-stream"
	}
	keep := map[string]string{}
	if cs, ok := params["charset"]; ok {
		keep["charset"] = cs
	}
	out := mime.FormatMediaType(mt, keep)
	if out == "" {
		return "application/octet-stream"
	}
	return out
}

// maxFilenameRunes bounds a served attachment's filename.
const maxFilenameRunes = 120

// SanitizeFilename makes a sender's attachment filename safe to offer for
// download: its last path element, without control characters, quotes,
// backslashes or the characters Windows refuses, without leading dots
// (no hidden files), at most 120 characters, and "attachment" when nothing
// is left. Non-ASCII letters are kept (Content-Disposition encodes them,
// RFC 6266).
func SanitizeFilename(name string) string {
	name = strings.ToValidUTF8(name, "")
	name = strings.ReplaceAll(name, `\`, "/")
	if name = path.Base("/" + name); name == "/" {
		name = ""
	}
	var b strings.Builder
	runes := 0
	for _, c := range name {
		if runes >= maxFilenameRunes {
			break
		}
		switch {
		case c == utf8.RuneError, unicode.IsControl(c), c == unicode.ReplacementChar:
			continue
		case unicode.In(c, unicode.Cf, unicode.Zl, unicode.Zp):
			continue // bidi overrides and other invisible formatting
		case strings.ContainsRune(`"<>:|?*/;`, c):
			b.WriteRune('_')
		case unicode.IsSpace(c):
			b.WriteRune(' ')
		default:
			b.WriteRune(c)
		}
		runes++
	}
	out := strings.TrimLeft(strings.TrimSpace(b.String()), ". ")
	out = strings.TrimRight(out, ". ")
	if out == "" {
		return "attachment"
	}
	return out
}
