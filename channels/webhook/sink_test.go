package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSinkVerifiesAndCountsDuplicates(t *testing.T) {
	clk := newClock()
	sink := NewSink(SinkConfig{Secrets: mustSigner(t, vectorSecret).Secrets(), Now: clk.Now, Keep: 3})
	srv := httptest.NewServer(sink)
	defer srv.Close()
	d := newDeliverer(t, clk, srv.URL)
	ctx := context.Background()
	for _, id := range []string{"dlv_1", "dlv_2", "dlv_1", "dlv_3"} {
		if _, err := d.Deliver(ctx, job(t, "ops", id)); err != nil {
			t.Fatalf("deliver %s: %v", id, err)
		}
	}
	// A forged webhook: signed with another secret.
	forger := newDeliverer(t, clk, srv.URL, func(_ *Config, ep *Endpoint) { ep.Signer = mustSigner(t, otherSecret) })
	if _, err := forger.Deliver(ctx, job(t, "ops", "dlv_forged")); err != nil {
		t.Fatalf("sink must answer 204 to unverified webhooks by default: %v", err)
	}
	st := sink.Stats()
	want := SinkStats{Total: 5, Unique: 4, Duplicates: 1, Unverified: 1}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if sink.Count("dlv_1") != 2 || sink.Count("dlv_2") != 1 {
		t.Errorf("counts dlv_1=%d dlv_2=%d", sink.Count("dlv_1"), sink.Count("dlv_2"))
	}
	recs := sink.Received()
	if len(recs) != 3 {
		t.Fatalf("kept %d, want 3 (Keep)", len(recs))
	}
	if recs[0].ID != "dlv_1" || !recs[0].Duplicate || recs[2].ID != "dlv_forged" || recs[2].Verified {
		t.Errorf("kept records, oldest first: %+v", recs)
	}
	if !strings.Contains(recs[2].Error, "no matching") {
		t.Errorf("forged record error %q", recs[2].Error)
	}

	// GET lists what was received.
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var listing struct {
		Total    int        `json:"total"`
		Received []Received `json:"received"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&listing); err != nil {
		t.Fatal(err)
	}
	if listing.Total != 5 || len(listing.Received) != 3 {
		t.Errorf("GET listing %+v", listing)
	}
}

func TestSinkRejectUnverified(t *testing.T) {
	clk := newClock()
	sink := NewSink(SinkConfig{Secrets: mustSigner(t, vectorSecret).Secrets(), Now: clk.Now, RejectUnverified: true})
	srv := httptest.NewServer(sink)
	defer srv.Close()
	// Replay of a genuine webhook ten minutes later fails the tolerance.
	d := newDeliverer(t, clk, srv.URL)
	if _, err := d.Deliver(context.Background(), job(t, "ops", "dlv_1")); err != nil {
		t.Fatal(err)
	}
	forger := newDeliverer(t, clk, srv.URL, func(_ *Config, ep *Endpoint) { ep.Signer = mustSigner(t, otherSecret) })
	if _, err := forger.Deliver(context.Background(), job(t, "ops", "dlv_2")); err == nil {
		t.Fatal("unverified webhook accepted with RejectUnverified")
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned POST: %d", resp.StatusCode)
	}
	if st := sink.Stats(); st.Total != 3 || st.Unverified != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestSinkChanged(t *testing.T) {
	sink := NewSink(SinkConfig{})
	ch := sink.Changed()
	srv := httptest.NewServer(sink)
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"type":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Changed not closed after a receipt")
	}
}

func TestSinkKeepsLargeEnvelopesOut(t *testing.T) {
	clk := newClock()
	sink := NewSink(SinkConfig{Secrets: mustSigner(t, vectorSecret).Secrets(), Now: clk.Now, MaxKeptEnvelope: 100})
	srv := httptest.NewServer(sink)
	defer srv.Close()
	d := newDeliverer(t, clk, srv.URL)
	if _, err := d.Deliver(context.Background(), job(t, "ops", "dlv_big")); err != nil {
		t.Fatal(err)
	}
	r := sink.Received()[0]
	if !r.Verified || r.Envelope != nil || r.EnvelopeBytes <= 100 {
		t.Fatalf("record %+v: want verified, envelope dropped, size kept", r)
	}
}
