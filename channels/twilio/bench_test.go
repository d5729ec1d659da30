package twilio

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	twilioapi "github.com/twilio/twilio-go"
	twclient "github.com/twilio/twilio-go/client"
	openapi "github.com/twilio/twilio-go/rest/api/v2010"

	"github.com/cool-ai/beachd/channels"
)

// benchFake answers every message creation with the same Twilio message
// resource, as fast as it can.
func benchFake(b *testing.B) *httptest.Server {
	resp := []byte(`{"sid":"SM0123456789abcdef0123456789abcdef","account_sid":"` + testAccount + `","status":"queued","to":"+447700900123","from":"+15550001111","body":"hi","direction":"outbound-api","num_segments":"1","api_version":"2010-04-01","date_created":"Sat, 21 Nov 2026 20:00:00 +0000"}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(resp)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// rewriteTransport is the least a raw twilio-go client needs to reach a
// local fake: api.twilio.com → the fake.
type rewriteTransport struct {
	base *url.URL
	next http.RoundTripper
}

func (t rewriteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = t.base.Scheme, t.base.Host, ""
	return t.next.RoundTrip(r)
}

// BenchmarkDeliverVsRawTwilioGo hands b.N messages to a local fake through
// the SMS Deliverer (render, opt-out check in bbolt, rate limiter, per-call
// client view, classification, receipt), interleaved with as many raw
// twilio-go CreateMessage calls to the same fake, and reports both rates
// and their ratio (target ≥ 0.6). ns/op is one of each.
func BenchmarkDeliverVsRawTwilioGo(b *testing.B) {
	srv := benchFake(b)
	base, _ := url.Parse(srv.URL)

	client := newTestClient(b, srv.URL, 10*time.Second)
	d, err := NewSMS(testConfig(), Deps{Client: client, Store: openStore(b), Limiter: fastLimiter()})
	if err != nil {
		b.Fatal(err)
	}
	jobs := make([]*channels.Job, b.N)
	for i := range jobs {
		jobs[i] = job(fmt.Sprintf("dlv_%d", i), "sms", alice, "Your flight BA2043 is booked for 6 people. Check-in opens 24 hours before departure.")
	}

	tc := &twclient.Client{
		Credentials: twclient.NewCredentials(testAccount, testToken),
		HTTPClient:  &http.Client{Timeout: 10 * time.Second, Transport: rewriteTransport{base: base, next: http.DefaultTransport.(*http.Transport).Clone()}},
	}
	tc.SetAccountSid(testAccount)
	raw := twilioapi.NewRestClientWithParams(twilioapi.ClientParams{Client: tc})
	body := "Your flight BA2043 is booked for 6 people. Check-in opens 24 hours before departure."
	params := (&openapi.CreateMessageParams{}).SetTo(alice).SetFrom(ourSMS).SetBody(body).SetStatusCallback("https://beachd.example.org/v1/inbound/twilio")
	// Warm both connection pools.
	if _, err := raw.Api.CreateMessage(params); err != nil {
		b.Fatal(err)
	}
	if _, err := d.Deliver(context.Background(), jobs[0]); err != nil {
		b.Fatal(err)
	}

	// Interleaved, so that both see the same machine load.
	b.ResetTimer()
	var ours, rawTook time.Duration
	oursEach := make([]time.Duration, 0, b.N)
	rawEach := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := d.Deliver(context.Background(), jobs[i]); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := raw.Api.CreateMessage(params); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		ours += t1.Sub(t0)
		rawTook += t2.Sub(t1)
		oursEach = append(oursEach, t1.Sub(t0))
		rawEach = append(rawEach, t2.Sub(t1))
	}
	b.StopTimer()

	oursRate := float64(b.N) / ours.Seconds()
	rawRate := float64(b.N) / rawTook.Seconds()
	b.ReportMetric(oursRate, "deliverer-msgs/s")
	b.ReportMetric(rawRate, "raw-twilio-go-msgs/s")
	b.ReportMetric(oursRate/rawRate, "ratio")
	// The machine is shared: medians are steadier than totals.
	slices.Sort(oursEach)
	slices.Sort(rawEach)
	b.ReportMetric(float64(rawEach[len(rawEach)/2])/float64(oursEach[len(oursEach)/2]), "median-ratio")
}
