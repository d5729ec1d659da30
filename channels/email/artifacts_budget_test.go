package email

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// byteCounter serves artifacts and counts what it is asked for and what
// it writes.
type byteCounter struct {
	requests, served atomic.Int64
}

// countingBody counts the body bytes the sender actually reads.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

type countingTransport struct {
	base http.RoundTripper
	read atomic.Int64
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if resp != nil {
		resp.Body = countingBody{resp.Body, &t.read}
	}
	return resp, err
}

// budgetSender is a sender with MaxArtifactBytes 1,024 (a budget of 2,048
// for one message's attachments) whose artifact client counts the body
// bytes it reads.
func budgetSender(t *testing.T) (*Sender, *countingTransport) {
	t.Helper()
	s := newTestSender(t, 2525, func(c *SenderConfig) { c.MaxArtifactBytes = 1024; c.ArtifactTimeout = 5 * time.Second }, true)
	ct := &countingTransport{base: s.http.Transport} // still the guarded transport
	s.http.Transport = ct
	return s, ct
}

// artifactServer serves /a<i> with size(i) bytes of PDF; chunked: without
// a Content-Length.
func artifactServer(t *testing.T, c *byteCounter, chunked bool, size func(i int) int, delay func(i int) time.Duration) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.requests.Add(1)
		var i int
		if _, err := fmt.Sscanf(r.URL.Path, "/a%d", &i); err != nil {
			http.NotFound(w, r)
			return
		}
		if delay != nil {
			time.Sleep(delay(i))
		}
		body := strings.Repeat("x", size(i))
		w.Header().Set("Content-Type", "application/pdf")
		if !chunked {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		}
		for len(body) > 0 {
			k := min(len(body), 100)
			n, err := io.WriteString(w, body[:k])
			c.served.Add(int64(n))
			if err != nil {
				return
			}
			if chunked {
				w.(http.Flusher).Flush()
			}
			body = body[k:]
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func budgetEnvelope(t *testing.T, srv *httptest.Server, n int, declared func(i int) int64) *envelope.Envelope {
	var parts []envelope.Part
	for i := range n {
		a := envelope.Artifact{ArtifactID: fmt.Sprintf("a%02d", i), MimeType: "application/pdf", Name: fmt.Sprintf("a%02d.pdf", i),
			URI: fmt.Sprintf("%s/a%d", srv.URL, i)}
		if declared != nil {
			a.SizeBytes = declared(i)
		}
		parts = append(parts, dataPart(t, "artifact", a))
	}
	return textEnvelope("Your documents.", parts...)
}

// attachedIDs lists the artifacts that carry bytes, and checks that every
// other one carries want as its note.
func attachedIDs(t *testing.T, got []render.FetchedArtifact, want string) []string {
	t.Helper()
	var ids []string
	for _, f := range got {
		switch {
		case len(f.Bytes) > 0 && f.Note == "":
			ids = append(ids, f.ArtifactID)
		case f.Note != want:
			t.Errorf("%s: note %q (%d bytes), want %q", f.ArtifactID, f.Note, len(f.Bytes), want)
		}
	}
	return ids
}

const noRoomNote = "too large to attach with the other files"

// TestArtifactDownloadsStayWithinTheBudget: fifty artifacts of 1,000
// bytes against a budget of 2,048. Only the first two are attached, and
// the sender reads at most the budget plus one limit per fetcher
// (2,048 + 4 × 1,025 = 6,148 bytes) of artifact bodies — not all 50,000.
func TestArtifactDownloadsStayWithinTheBudget(t *testing.T) {
	const allowance = 2*1024 + artifactFetchers*(1024+1)
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			var c byteCounter
			srv := artifactServer(t, &c, chunked, func(int) int { return 1000 }, nil)
			s, ct := budgetSender(t)
			got := s.fetchArtifacts(context.Background(), budgetEnvelope(t, srv, 50, nil))
			ids := attachedIDs(t, got, noRoomNote)
			if strings.Join(ids, ",") != "a00,a01" {
				t.Errorf("attached %v, want a00,a01", ids)
			}
			read := ct.read.Load()
			t.Logf("read %d body bytes over %d requests (server wrote %d)", read, c.requests.Load(), c.served.Load())
			if read > allowance {
				t.Errorf("read %d body bytes, want at most %d", read, allowance)
			}
		})
	}
}

// TestDeclaredSizesSpareTheDownloads: with SizeBytes declared, the budget
// is reserved before a fetch starts, and an artifact that cannot fit is
// not even asked for: two requests, 2,000 bytes served.
func TestDeclaredSizesSpareTheDownloads(t *testing.T) {
	var c byteCounter
	srv := artifactServer(t, &c, false, func(int) int { return 1000 }, nil)
	s, ct := budgetSender(t)
	got := s.fetchArtifacts(context.Background(), budgetEnvelope(t, srv, 50, func(int) int64 { return 1000 }))
	ids := attachedIDs(t, got, noRoomNote)
	if strings.Join(ids, ",") != "a00,a01" {
		t.Errorf("attached %v, want a00,a01", ids)
	}
	t.Logf("read %d body bytes over %d requests (server wrote %d)", ct.read.Load(), c.requests.Load(), c.served.Load())
	if n, served := c.requests.Load(), c.served.Load(); n != 2 || served > 2*1024 {
		t.Errorf("%d requests, %d bytes served; want 2 requests and at most 2,048 bytes", n, served)
	}
}

// TestArtifactBudgetGoesInEnvelopeOrder: the first artifact is the slowest
// to arrive, yet it gets the budget first; a later small one still fits
// in what the others leave.
func TestArtifactBudgetGoesInEnvelopeOrder(t *testing.T) {
	sizes := []int{600, 600, 600, 600, 100, 900, 40}
	for run := range 5 {
		var c byteCounter
		srv := artifactServer(t, &c, run%2 == 1, func(i int) int { return sizes[i] }, func(i int) time.Duration {
			if i == 0 {
				return 50 * time.Millisecond
			}
			return 0
		})
		s, _ := budgetSender(t)
		got := s.fetchArtifacts(context.Background(), budgetEnvelope(t, srv, len(sizes), nil))
		// 600+600+600 = 1,800; +600 no; +100 = 1,900; +900 no; +40 = 1,940.
		if ids := attachedIDs(t, got, noRoomNote); strings.Join(ids, ",") != "a00,a01,a02,a04,a06" {
			t.Errorf("run %d: attached %v, want a00,a01,a02,a04,a06", run, ids)
		}
	}
}
