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
	"sync/atomic"
	"time"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/fetch"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// Delivery.Extra keys that place a message in a conversation: the
// Message-ID of the inbound mail we answer and its References.
const (
	ExtraInReplyTo  = envelope.ExtraInReplyTo
	ExtraReferences = envelope.ExtraReferences
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
		Thread:       threadOf(d.Extra),
		Conversation: d.Extra[envelope.ExtraConversation] != "",
		Reminder:     d.Extra[envelope.ExtraApprovalNotice] == envelope.NoticeReminder,
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
		seen := map[string]bool{}
		for _, r := range append(in.Thread.References, in.Thread.InReplyTo) {
			if r = "<" + strings.Trim(r, "<>") + ">"; !seen[r] {
				seen[r] = true
				refs = append(refs, r)
			}
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
// artifactFetchers at a time, through the guarded client (channels/fetch:
// the URL comes from content, so loopback, private and metadata addresses
// are refused unless fetch.allow lists them). An artifact that is too big
// becomes a Note saying so; one that could not be fetched for any other
// reason (refused, unreachable, too slow, an error status, another type
// than declared) gets the one note "could not be attached", its cause
// logged (the renderer then links it). Together the fetches get at most
// half the time left for the attempt, so that the SMTP transaction keeps
// the rest.
//
// The attachments together stay within twice MaxArtifactBytes (the
// budget), given out in envelope order: an artifact is attached when it
// fits in what the earlier attachments left, whatever order the fetches
// finish in. The budget also bounds the downloads: a fetch starts only
// while the artifacts before it may still leave room (a declared
// SizeBytes is reserved), one that starts with nothing before it in
// flight reads no more than what is left, and none starts once the
// budget is spent ("too large to attach with the other files"). In all,
// the bodies read for one message stay within the budget plus one
// artifact's worth per fetcher (see fetchAll).
func (s *Sender) fetchArtifacts(ctx context.Context, env *envelope.Envelope) []render.FetchedArtifact {
	var out []render.FetchedArtifact
	var uris []string
	var sizes []int64
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
		sizes = append(sizes, max(a.SizeBytes, 0))
	}
	if len(out) == 0 {
		return nil
	}
	var jobs []*artifactFetch
	for i := range out {
		if uris[i] != "" {
			jobs = append(jobs, &artifactFetch{f: &out[i], uri: uris[i], declared: sizes[i]})
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
		defer cancel()
	}
	s.fetchAll(ctx, jobs)
	return out
}

// artifactFetchers bounds the artifact fetches of one message in flight.
const artifactFetchers = 4

// Notes shown in place of an artifact that is not attached.
const (
	// noteNoRoom: the artifact does not fit in what the attachments before
	// it left of the budget.
	noteNoRoom = "too large to attach with the other files"
	// noteNotAttached: the fetch failed, whatever the cause (refused
	// address, unreachable, slow, an error status, another type).
	noteNotAttached = "could not be attached"
)

// artifactFetch is one artifact to download. fetchAll alone touches it,
// but for res (written by the fetch before it reports on the channel)
// and live.
type artifactFetch struct {
	f        *render.FetchedArtifact
	uri      string
	declared int64 // SizeBytes, 0 when not given

	limit    int64 // body bytes the fetch may read
	finished bool
	res      fetchResult
	live     fetchProgress
}

// fetchProgress is what a fetch in flight has learnt so far.
type fetchProgress struct {
	read     atomic.Int64 // body bytes read
	expected atomic.Int64 // the Content-Length, once the headers are in
}

// weight is what an unsettled artifact may take of the budget, as far as
// is known yet.
func (j *artifactFetch) weight() int64 {
	if !j.finished {
		return max(j.live.read.Load(), j.live.expected.Load(), j.declared)
	}
	if j.res.err != nil {
		return 0
	}
	return max(int64(len(j.res.b)), j.declared)
}

// fetchAll runs the fetches, artifactFetchers at a time, and settles them
// in envelope order. The budget (twice MaxArtifactBytes) is what the
// attachments may take together: an artifact is attached when its size,
// or its declared size if that is larger, fits in what the ones before it
// left. So the outcome does not depend on which fetch finishes first, and
// a fetch is started in one of two ways:
//
//   - nothing before it is unsettled: what is left is known. If it is
//     spent, or smaller than the declared size, the artifact is not
//     fetched at all; otherwise the fetch reads at most what is left (a
//     body that does not fit is linked, noteNoRoom, as it would have been
//     had it been read in full);
//   - otherwise, while it would still fit after the attachments so far
//     and the artifacts fetched or being fetched before it (declared
//     sizes reserved, the others counted by their Content-Length or what
//     they have read), taking its declared size or, without one, up to
//     MaxArtifactBytes: it reads at most MaxArtifactBytes+1 and is
//     settled when its turn comes. Else it waits for those to settle.
//
// Besides, the body bytes read for the message, failed and dropped
// fetches included, stay within the budget plus MaxArtifactBytes+1 per
// fetcher: a fetch starts only if its limit fits in that allowance. Only
// a message whose fetches waste more than that (bodies dropped after
// they were read) runs out of it; the rest is then linked, noteNoRoom.
func (s *Sender) fetchAll(ctx context.Context, jobs []*artifactFetch) {
	maxBytes := s.cfg.MaxArtifactBytes
	budget := 2 * maxBytes
	allowance := budget + artifactFetchers*(maxBytes+1)
	var committed, downloaded, reserved int64
	done := make(chan *artifactFetch)
	start := func(j *artifactFetch, limit int64) {
		j.limit = limit
		reserved += limit
		uri, mt := j.uri, j.f.MimeType
		go func() {
			j.res = s.fetch(ctx, uri, mt, limit, &j.live)
			done <- j
		}()
	}
	next, settled, inflight := 0, 0, 0
	for {
		for settled < next && jobs[settled].finished {
			committed += s.settle(jobs[settled], budget-committed)
			settled++
		}
		if settled == len(jobs) {
			return
		}
		if next < len(jobs) && inflight < artifactFetchers {
			j := jobs[next]
			if next == settled { // nothing in flight: what is left is known
				left := budget - committed
				limit := min(maxBytes, left) + 1
				next++
				if left <= 0 || j.declared > left || downloaded+limit > allowance {
					j.f.Note = noteNoRoom
					settled++
					continue
				}
				start(j, limit)
				inflight++
				continue
			}
			pending := committed
			for _, k := range jobs[settled:next] {
				pending += k.weight()
			}
			room := budget - pending
			fits := room > maxBytes // whatever its size, as far as is known yet
			if j.declared > 0 {
				fits = j.declared <= room
			}
			if fits && downloaded+reserved+maxBytes+1 <= allowance {
				next++
				start(j, maxBytes+1)
				inflight++
				continue
			}
		}
		// Wait for a fetch: the first unsettled artifact is in flight.
		j := <-done
		j.finished = true
		inflight--
		reserved -= j.limit
		downloaded += j.live.read.Load()
	}
}

// settle gives a fetched artifact its bytes or its note; left is what the
// artifacts before it left of the budget. It returns the bytes attached.
func (s *Sender) settle(j *artifactFetch, left int64) int64 {
	f, r := j.f, j.res
	switch {
	case left <= 0 || j.declared > left:
		// Not fetched at all had nothing been in flight when its turn came.
		f.Note = noteNoRoom
	case errors.Is(r.err, errArtifactTooLarge) && r.readPast && left < s.cfg.MaxArtifactBytes:
		// Read past MaxArtifactBytes without a Content-Length: fetched
		// with nothing in flight, it would have been cut at left.
		f.Note = noteNoRoom
	case errors.Is(r.err, errArtifactTooLarge):
		f.Note = "too large to attach"
	case errors.Is(r.err, errNoRoom):
		f.Note = noteNoRoom
	case r.err != nil:
		// One note whatever went wrong: a recipient who could tell a
		// refused address from a closed port, a slow one or a login page
		// would learn the network behind beachd. The cause is logged.
		f.Note = noteNotAttached
		msg := "artifact fetch failed"
		if errors.Is(r.err, fetch.ErrRefused) {
			msg = "artifact fetch refused"
		}
		s.log.Warn(msg, "artifact_id", f.ArtifactID, "error", r.err)
	case int64(len(r.b)) > left:
		f.Note = noteNoRoom
	default:
		f.Bytes = r.b
		if f.MimeType == "" {
			f.MimeType = r.mt
		}
		return int64(len(r.b))
	}
	return 0
}

var (
	errArtifactTooLarge = errors.New("artifact too large")
	// errNoRoom: the body is larger than what the fetch was allowed to
	// read, which is what is left of the budget.
	errNoRoom    = errors.New("artifact larger than what is left of the budget")
	errOtherType = errors.New("the server sent another type than declared")
)

// fetchResult is what one fetch got: the body and its type, or why not.
type fetchResult struct {
	b        []byte
	mt       string
	err      error
	readPast bool // errArtifactTooLarge found by reading, without a Content-Length
}

// fetch downloads uri, reading at most limit bytes of the body (counted in
// live as they come, as is the Content-Length): a longer body is errArtifactTooLarge when limit is
// past MaxArtifactBytes, else errNoRoom. A Content-Length says so without
// reading, and a type other than declaredType (when given) is refused
// before the body is read.
func (s *Sender) fetch(ctx context.Context, uri, declaredType string, limit int64, live *fetchProgress) fetchResult {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ArtifactTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return fetchResult{err: err}
	}
	resp, err := s.http.Do(req)
	if err != nil {
		if errors.Is(err, fetch.ErrTooLarge) {
			return fetchResult{err: errArtifactTooLarge}
		}
		if ctx.Err() != nil {
			return fetchResult{err: fmt.Errorf("%w: %w", ctx.Err(), err)}
		}
		return fetchResult{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fetchResult{err: fmt.Errorf("status %d", resp.StatusCode)}
	}
	tooLong := errNoRoom
	if limit > s.cfg.MaxArtifactBytes {
		tooLong = errArtifactTooLarge
	}
	if resp.ContentLength > s.cfg.MaxArtifactBytes {
		return fetchResult{err: errArtifactTooLarge}
	}
	live.expected.Store(resp.ContentLength)
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if declaredType != "" && mt != "" && !sameType(declaredType, mt) {
		return fetchResult{err: errOtherType}
	}
	if resp.ContentLength >= limit {
		return fetchResult{err: tooLong}
	}
	b, err := io.ReadAll(io.LimitReader(countingReader{resp.Body, &live.read}, limit))
	if errors.Is(err, fetch.ErrTooLarge) { // the fetcher's own bound
		return fetchResult{err: errArtifactTooLarge, readPast: true}
	}
	if err != nil {
		if ctx.Err() != nil {
			return fetchResult{err: ctx.Err()}
		}
		return fetchResult{err: err}
	}
	if int64(len(b)) >= limit {
		return fetchResult{err: tooLong, readPast: tooLong == errArtifactTooLarge}
	}
	return fetchResult{b: b, mt: mt}
}

// countingReader adds the bytes read to n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

var genericTypeRe = regexp.MustCompile(`^(application/octet-stream|binary/octet-stream)$`)

// sameType: the declared and served types agree (a server that says
// octet-stream agrees with anything; an HTML page for a PDF does not).
func sameType(declared, served string) bool {
	d, _, _ := mime.ParseMediaType(declared)
	return strings.EqualFold(d, served) || genericTypeRe.MatchString(served)
}
