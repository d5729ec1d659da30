package email

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/emersion/go-message"

	"github.com/cool-ai/beachd/envelope"
)

// maxFilename bounds an attachment's file name, in runes.
const maxFilename = 100

// attachment reads one attachment part. Its bytes are kept while the
// message's attachments stay within MaxAttachmentBytes; past that it is
// listed with its Size and no Data. Past MaxAttachments it is not listed.
// A body that cannot be decoded to its end keeps what was read, with a
// warning.
func (w *walker) attachment(e *message.Entity, mt, name string) {
	if len(w.atts) >= w.opts.MaxAttachments {
		w.unlisted++
		return
	}
	a := envelope.InboundAttachment{
		Filename:  sanitizeFilename(name, len(w.atts)+1),
		MediaType: attachmentMediaType(mt),
	}
	left := int64(w.opts.MaxAttachmentBytes) - w.attBytes
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(e.Body, max(left, 0)+1))
	if n > left {
		// Over what is left: count the rest, keep nothing.
		rest, err2 := io.Copy(io.Discard, e.Body)
		if err == nil {
			err = err2
		}
		a.Size = n + rest
		w.p.warn("attachment %q (%d bytes) not kept: the attachments of a message are kept up to %d bytes", a.Filename, a.Size, w.opts.MaxAttachmentBytes)
	} else {
		a.Size = n
		a.Data = buf.Bytes()
		if a.Data == nil {
			a.Data = []byte{}
		}
		w.attBytes += n
	}
	if err != nil {
		w.p.warn("attachment %q: %v (kept the %d bytes read)", a.Filename, err, a.Size)
	}
	w.atts = append(w.atts, a)
}

// partFilename is the file name a part declares: Content-Disposition's
// filename, else Content-Type's name (RFC 2231 values are decoded by the
// media type parser, RFC 2047 encoded words here).
func partFilename(disp, ct map[string]string) string {
	name := disp["filename"]
	if strings.TrimSpace(name) == "" {
		name = ct["name"]
	}
	name = strings.TrimSpace(name)
	if strings.Contains(name, "=?") {
		if d, err := newWordDecoder().DecodeHeader(name); err == nil {
			name = d
		}
	}
	return name
}

// attachmentMediaType is the media type of an attachment: the part's own
// when it is a valid type/subtype, else application/octet-stream.
func attachmentMediaType(mt string) string {
	mt = strings.ToLower(strings.TrimSpace(mt))
	if len(mt) > 255 || !envelope.ValidMediaType(mt) {
		return "application/octet-stream"
	}
	return mt
}

// sanitizeFilename keeps a file name safe to store, show and serve: no
// directories, no control or format characters (a right-to-left override
// could disguise the extension), none of / \ : * ? " < > |, no leading or
// trailing dots and spaces, valid UTF-8, at most maxFilename runes with
// the extension kept. An empty result is "attachment-N".
func sanitizeFilename(s string, n int) string {
	s = strings.ToValidUTF8(s, "_")
	s = path.Base(strings.ReplaceAll(s, "\\", "/"))
	if s == "/" || s == "." {
		s = ""
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r), r == '\u2028', r == '\u2029',
			strings.ContainsRune(`/\:*?"<>|`, r):
			b.WriteByte('_')
		case unicode.IsSpace(r):
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	out := strings.Trim(b.String(), ". ")
	if out == "" {
		return "attachment-" + strconv.Itoa(n)
	}
	if utf8.RuneCountInString(out) > maxFilename {
		ext := path.Ext(out)
		if utf8.RuneCountInString(ext) > 10 {
			ext = ""
		}
		r := []rune(strings.TrimSuffix(out, ext))
		out = strings.TrimRight(string(r[:maxFilename-utf8.RuneCountInString(ext)]), ". ") + ext
	}
	return out
}

// attachmentSummary is a one-line account of a message's attachments for
// logs (names are content: only counts and sizes).
func attachmentSummary(atts []envelope.InboundAttachment) string {
	var kept, listed int
	var bytes int64
	for _, a := range atts {
		if a.Data != nil {
			kept++
			bytes += a.Size
		} else {
			listed++
		}
	}
	return fmt.Sprintf("%d kept (%d bytes), %d listed without data", kept, bytes, listed)
}
