package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// The operator queries of deliveries beyond listing by state:
//
//	GET /v1/deliveries?channel=&state=&agent=&to=&since=&until=&before=&limit=
//	    → 200 {"deliveries":[…], "next"?: "<id to pass as before>"}, newest
//	    first; since/until are RFC 3339 and bound createdAt; to matches a
//	    part of the recipient, ignoring case.
//	GET /v1/deliveries/stats → 200 queue depth by state, per-channel counts,
//	    sent/dead over the last hour and day, dead letters.
//	POST /v1/deliveries/retry {"state":"dead","since":"<RFC 3339>",
//	    "channel"?, "dry_run"?} → 200 {"count":N,"dryRun":bool,"more":bool}:
//	    every dead delivery that died at or after since is made due again
//	    (at most store.MaxBulkRetry per call; more says there are others).
//	    With dry_run nothing changes and count says how many would be.

// filtered reports whether q asks for more than a state listing.
func filtered(q url.Values) bool {
	for _, k := range []string{"channel", "agent", "to", "since", "until", "before"} {
		if q.Get(k) != "" {
			return true
		}
	}
	return false
}

// ParseDeliveryFilter reads a DeliveryFilter from query parameters; the
// console shares it.
func ParseDeliveryFilter(q url.Values) (store.DeliveryFilter, error) {
	f := store.DeliveryFilter{State: store.State(q.Get("state")), Channel: q.Get("channel"), Agent: q.Get("agent"),
		To: q.Get("to"), Before: q.Get("before")}
	var problems []envelope.Problem
	if f.State != "" && !f.State.Valid() {
		problems = append(problems, envelope.Problem{Path: "state", Reason: fmt.Sprintf("unknown state %q: one of queued, sending, sent, retrying, dead", f.State)})
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				problems = append(problems, envelope.Problem{Path: p.name, Reason: "must be an RFC 3339 time such as 2026-01-02T15:04:05Z"})
				continue
			}
			*p.dst = t
		}
	}
	for _, p := range []struct{ name, v string }{{"channel", f.Channel}, {"agent", f.Agent}, {"to", f.To}, {"before", f.Before}} {
		if len(p.v) > 256 {
			problems = append(problems, envelope.Problem{Path: p.name, Reason: "longer than 256 characters"})
		}
	}
	if problems != nil {
		return f, &envelope.ValidationError{Problems: problems}
	}
	return f, nil
}

func (s *Server) queryDeliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := ParseDeliveryFilter(q)
	if err != nil {
		WriteError(w, s.log, err)
		return
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			WriteError(w, s.log, &envelope.ValidationError{Problems: []envelope.Problem{{Path: "limit", Reason: "must be an integer from 1 to 1000"}}})
			return
		}
		limit = n
	}
	ds, more, err := s.db.QueryDeliveries(r.Context(), f, limit)
	if err != nil {
		WriteError(w, s.log, err)
		return
	}
	out := map[string]any{"deliveries": deliveryItems(ds)}
	if more && len(ds) > 0 {
		out["next"] = ds[len(ds)-1].ID
	}
	WriteJSON(w, http.StatusOK, out)
}

func (s *Server) deliveryStats(w http.ResponseWriter, r *http.Request) {
	st, err := s.db.DeliveryStats(r.Context(), s.cfg.Now())
	if err != nil {
		WriteError(w, s.log, err)
		return
	}
	WriteJSON(w, http.StatusOK, deliveryStatsView(st))
}

// BulkRetryRequest is the body of POST /v1/deliveries/retry.
type BulkRetryRequest struct {
	State   string    `json:"state"`
	Since   time.Time `json:"since"`
	Channel string    `json:"channel,omitempty"`
	DryRun  bool      `json:"dry_run,omitempty"`
}

// BulkRetryResult answers POST /v1/deliveries/retry.
type BulkRetryResult struct {
	Count  int  `json:"count"`
	DryRun bool `json:"dryRun"`
	More   bool `json:"more,omitempty"`
}

func (s *Server) bulkRetry(w http.ResponseWriter, r *http.Request) {
	body, err := envelope.ReadLimited(r.Body, 4<<10)
	if err != nil {
		WriteError(w, s.log, err)
		return
	}
	var req BulkRetryRequest
	if err := envelope.StrictUnmarshal(body, &req); err != nil {
		WriteError(w, s.log, &envelope.ValidationError{Problems: []envelope.Problem{{Reason: err.Error()}}})
		return
	}
	var problems []envelope.Problem
	if req.State != string(store.StateDead) {
		problems = append(problems, envelope.Problem{Path: "state", Reason: `must be "dead": only dead deliveries are retried`})
	}
	if req.Since.IsZero() {
		problems = append(problems, envelope.Problem{Path: "since", Reason: "required: an RFC 3339 time; dead deliveries that died at or after it are retried"})
	}
	if problems != nil {
		WriteError(w, s.log, &envelope.ValidationError{Problems: problems})
		return
	}
	res, err := bulkRetry(r.Context(), s.db, req)
	if err != nil {
		WriteError(w, s.log, err)
		return
	}
	if !req.DryRun && res.Count > 0 && s.ingest != nil {
		s.ingest.notify()
	}
	WriteJSON(w, http.StatusOK, res)
}

// bulkRetry counts (dry run) or retries the dead deliveries req selects.
func bulkRetry(ctx context.Context, db store.Deliveries, req BulkRetryRequest) (BulkRetryResult, error) {
	if req.DryRun {
		ids, more, err := db.DeadSince(ctx, req.Since, req.Channel)
		return BulkRetryResult{Count: len(ids), DryRun: true, More: more}, err
	}
	n, err := db.RetryDeadSince(ctx, req.Since, req.Channel)
	return BulkRetryResult{Count: n, More: n == store.MaxBulkRetry}, err
}
