package email

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// Delivery.Extra keys that place a message in a conversation: the
// Message-ID of the inbound mail we answer and its References.
const (
	ExtraInReplyTo  = "inReplyTo"
	ExtraReferences = "references"
)

// render produces the rendition of a job: artifacts fetched first, then the
// renderer (or, without one, the plain-text fallback).
func (s *Sender) render(ctx context.Context, job *channels.Job) (*render.Email, error) {
	d := job.Delivery
	in := render.Input{
		Envelope: job.Envelope, Registry: s.registry, DeliveryID: d.ID,
		Recipient: render.Recipient{Channel: envelope.ChannelEmail, Address: d.To},
		Approvals: job.Approvals, Now: s.cfg.Now(),
		From: s.cfg.From, ReplyTo: s.cfg.ReplyTo, MessageIDDomain: s.cfg.MessageIDDomain,
		Thread: threadOf(d.Extra),
	}
	if s.renderer == nil {
		return fallbackEmail(in), nil
	}
	in.Artifacts = s.fetchArtifacts(ctx, job.Envelope)
	return s.renderer.Email(in)
}

// threadOf reads the threading values a delivery carries.
func threadOf(extra map[string]string) *render.Thread {
	irt := strings.TrimSpace(extra[ExtraInReplyTo])
	if irt == "" {
		return nil
	}
	return &render.Thread{InReplyTo: irt, References: msgIDs(extra[ExtraReferences])}
}

// fallbackEmail is used only when no renderer is configured: the plain
// text of the response parts, our Message-ID and the auto-reply
// suppression headers.
func fallbackEmail(in render.Input) *render.Email {
	text := in.Envelope.Text("response")
	subject := strings.TrimSpace(strings.SplitN(text, "\n", 2)[0])
	if len([]rune(subject)) > 70 {
		subject = string([]rune(subject)[:70]) + "…"
	}
	if subject == "" {
		subject = "Message from your agent"
	}
	domain := in.MessageIDDomain
	if domain == "" {
		if _, d, ok := strings.Cut(strings.Trim(addrOf(in.From), "<>"), "@"); ok {
			domain = d
		}
	}
	local := in.DeliveryID
	var token string
	for _, a := range in.Approvals {
		if a.Token != "" {
			token = a.Token
			break
		}
	}
	if token != "" {
		local += "." + token
		subject += " [approval:" + token + "]"
	}
	id := "<" + local + "@" + domain + ">"
	h := map[string]string{"Message-ID": id, "Auto-Submitted": "auto-generated", "X-Auto-Response-Suppress": "All"}
	if in.ReplyTo != "" {
		rt := in.ReplyTo
		if token != "" {
			if l, d, ok := strings.Cut(addrOf(rt), "@"); ok {
				rt = l + "+" + token + "@" + d
			}
		}
		h["Reply-To"] = rt
	}
	if in.Thread != nil {
		h["In-Reply-To"] = "<" + strings.Trim(in.Thread.InReplyTo, "<>") + ">"
		var refs []string
		for _, r := range append(in.Thread.References, in.Thread.InReplyTo) {
			refs = append(refs, "<"+strings.Trim(r, "<>")+">")
		}
		h["References"] = strings.Join(refs, " ")
	}
	return &render.Email{Subject: subject, Text: text + "\n", Headers: h, MessageID: id}
}

func addrOf(s string) string {
	if a := looseAddress(s); a != "" {
		return a
	}
	return s
}

// fetchArtifacts downloads the artifacts that have a URI and no inline
// bytes, each bounded by MaxArtifactBytes and ArtifactTimeout, up to
// artifactFetchers at a time. An artifact that is too big, too slow,
// unreachable or of another type than declared becomes a Note (the
// renderer then links it). Together the fetches get at most half the time
// left for the attempt, so that the SMTP transaction keeps the rest; and
// the attachments together stay within twice MaxArtifactBytes.
func (s *Sender) fetchArtifacts(ctx context.Context, env *envelope.Envelope) []render.FetchedArtifact {
	var out []render.FetchedArtifact
	var uris []string
	for _, p := range env.PartsOf("artifact") {
		var a envelope.Artifact
		if err := p.DecodeData(&a); err != nil || a.ArtifactID == "" || len(a.Bytes) > 0 {
			continue
		}
		u, err := url.Parse(a.URI)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			continue
		}
		f := render.FetchedArtifact{ArtifactID: a.ArtifactID, MimeType: a.MimeType, Name: a.Name}
		if a.SizeBytes > s.cfg.MaxArtifactBytes {
			f.Note = fmt.Sprintf("too large to attach (%d bytes)", a.SizeBytes)
			a.URI = "" // not fetched
		}
		out = append(out, f)
		uris = append(uris, a.URI)
	}
	if len(out) == 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
		defer cancel()
	}
	sem := make(chan struct{}, artifactFetchers)
	var wg sync.WaitGroup
	for i := range out {
		if uris[i] == "" {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(f *render.FetchedArtifact, uri string) {
			defer func() { <-sem; wg.Done() }()
			b, mt, err := s.fetch(ctx, uri)
			switch {
			case errors.Is(err, errArtifactTooLarge):
				f.Note = "too large to attach"
			case errors.Is(err, context.DeadlineExceeded):
				f.Note = "could not be fetched in time"
			case err != nil:
				f.Note = "could not be fetched"
				s.log.Warn("artifact fetch failed", "artifact_id", f.ArtifactID, "error", err)
			case f.MimeType != "" && mt != "" && !sameType(f.MimeType, mt):
				f.Note = "the server sent another type than declared"
			default:
				f.Bytes = b
				if f.MimeType == "" {
					f.MimeType = mt
				}
			}
		}(&out[i], uris[i])
	}
	wg.Wait()
	total := int64(0)
	for i := range out {
		n := int64(len(out[i].Bytes))
		if n == 0 {
			continue
		}
		if total+n > 2*s.cfg.MaxArtifactBytes {
			out[i].Bytes = nil
			out[i].Note = "too large to attach with the other files"
			continue
		}
		total += n
	}
	return out
}

// artifactFetchers bounds the artifact fetches of one message in flight.
const artifactFetchers = 4

var errArtifactTooLarge = errors.New("artifact too large")

func (s *Sender) fetch(ctx context.Context, uri string) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ArtifactTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("status %d", resp.StatusCode)
	}
	if resp.ContentLength > s.cfg.MaxArtifactBytes {
		return nil, "", errArtifactTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxArtifactBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, "", err
	}
	if int64(len(b)) > s.cfg.MaxArtifactBytes {
		return nil, "", errArtifactTooLarge
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return b, mt, nil
}

var genericTypeRe = regexp.MustCompile(`^(application/octet-stream|binary/octet-stream)$`)

// sameType: the declared and served types agree (a server that says
// octet-stream agrees with anything; an HTML page for a PDF does not).
func sameType(declared, served string) bool {
	d, _, _ := mime.ParseMediaType(declared)
	return strings.EqualFold(d, served) || genericTypeRe.MatchString(served)
}
