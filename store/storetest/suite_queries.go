package storetest

import (
	"slices"
	"time"

	"github.com/cool-ai/beachd/store"
)

// queryCases are the listings and the operator's queries.
var queryCases = []testCase{
	{"query/ListDeliveries lists oldest first, pages after an id, and lists jobs in flight as sending", listDeliveries},
	{"query/QueryDeliveries filters, lists newest first and pages", queryDeliveries},
	{"query/DeliveryStats counts by state and channel and the last hour's sends", deliveryStats},
	{"query/DeadSince and RetryDeadSince select the dead of a channel since a time", deadSince},
	{"query/approvals, inbound records and conversations page", listPages},
}

func listDeliveries(e *env) {
	jobs := e.ingestSpaced(to("webhook", "ep0"), to("webhook", "ep1"), to("webhook", "ep2"))
	page, err := e.s.ListDeliveries(e.ctx, "", "", 2)
	e.ok(err, "first page")
	if !slices.Equal(ids(page), jobs[:2]) {
		e.t.Fatalf("first page %v, want %v", ids(page), jobs[:2])
	}
	page, err = e.s.ListDeliveries(e.ctx, "", jobs[1], 2)
	e.ok(err, "second page")
	if !slices.Equal(ids(page), jobs[2:]) {
		e.t.Fatalf("second page %v, want %v", ids(page), jobs[2:])
	}
	claimed := e.claim(1)
	sending, err := e.s.ListDeliveries(e.ctx, store.StateSending, "", 10)
	e.ok(err, "list sending")
	if !slices.Equal(ids(sending), ids(claimed)) {
		e.t.Fatalf("sending %v, want %v", ids(sending), ids(claimed))
	}
	queued, err := e.s.ListDeliveries(e.ctx, store.StateQueued, "", 10)
	e.ok(err, "list queued")
	if !slices.Equal(ids(queued), jobs[1:]) {
		e.t.Fatalf("queued %v, want %v (the job in flight is not listed as queued)", ids(queued), jobs[1:])
	}
	counts, err := e.s.CountByState(e.ctx)
	e.ok(err, "count")
	if counts[store.StateSending] != 1 || counts[store.StateQueued] != 2 {
		e.t.Fatalf("counts %v", counts)
	}
	e.record(claimed[0], store.Outcome{State: store.StateSent})
}

func queryDeliveries(e *env) {
	jobs := e.ingestSpaced(to("email", "Ann@Example.org"), to("sms", "+15550001111"), to("email", "bob@example.org"))
	e.advance(time.Hour)
	other, err := e.s.Ingest(e.ctx, store.Ingest{Envelope: []byte(`{}`), Agent: "other", Deliveries: []store.NewDelivery{to("email", "ann@example.org")}})
	e.ok(err, "ingest for another agent")
	jobs = append(jobs, other.Deliveries[0].ID)
	for _, c := range []struct {
		name string
		f    store.DeliveryFilter
		want []string
	}{
		{"everything", store.DeliveryFilter{}, []string{jobs[3], jobs[2], jobs[1], jobs[0]}},
		{"channel", store.DeliveryFilter{Channel: "email"}, []string{jobs[3], jobs[2], jobs[0]}},
		{"agent", store.DeliveryFilter{Agent: "travel", Channel: "email"}, []string{jobs[2], jobs[0]}},
		{"recipient, any case", store.DeliveryFilter{To: "ANN@"}, []string{jobs[3], jobs[0]}},
		{"since", store.DeliveryFilter{Since: start.Add(30 * time.Minute)}, []string{jobs[3]}},
		{"until", store.DeliveryFilter{Until: start.Add(time.Millisecond)}, []string{jobs[0]}},
		{"state", store.DeliveryFilter{State: store.StateDead}, nil},
		{"before", store.DeliveryFilter{Before: jobs[2]}, []string{jobs[1], jobs[0]}},
	} {
		got, more, err := e.s.QueryDeliveries(e.ctx, c.f, 10)
		e.ok(err, "query "+c.name)
		if !slices.Equal(ids(got), c.want) || more {
			e.t.Fatalf("query %s: %v (more %v), want %v", c.name, ids(got), more, c.want)
		}
	}
	got, more, err := e.s.QueryDeliveries(e.ctx, store.DeliveryFilter{}, 2)
	e.ok(err, "query a page")
	if !slices.Equal(ids(got), []string{jobs[3], jobs[2]}) || !more {
		e.t.Fatalf("page of 2: %v (more %v)", ids(got), more)
	}
}

func deliveryStats(e *env) {
	e.ingest(to("email", "a@example.org"), to("sms", "+1"), to("sms", "+2"))
	got := e.claim(10)
	byChannel := map[string][]*store.Delivery{}
	for _, d := range got {
		byChannel[d.Channel] = append(byChannel[d.Channel], d)
	}
	e.record(byChannel["email"][0], store.Outcome{State: store.StateSent})
	e.record(byChannel["sms"][0], store.Outcome{State: store.StateDead, Error: "21211 invalid number", DeadReason: "invalid"})
	e.record(byChannel["sms"][1], store.Outcome{State: store.StateRetrying, NextAttemptAt: e.now().Add(time.Hour), Error: "timeout"})
	e.advance(2 * time.Hour)
	e.ingest(to("email", "b@example.org"))
	st, err := e.s.DeliveryStats(e.ctx, e.now())
	e.ok(err, "stats")
	want := map[store.State]int{store.StateSent: 1, store.StateDead: 1, store.StateRetrying: 1, store.StateQueued: 1}
	for s, n := range want {
		if st.ByState[s] != n {
			e.t.Fatalf("by state %v, want %v", st.ByState, want)
		}
	}
	if st.Created1h != 1 || st.Created24 != 4 || st.Sent1h != 0 || st.Sent24h != 1 || st.Dead != 1 || st.Dead24h != 1 || st.Dead1h != 0 {
		e.t.Fatalf("stats %+v", st)
	}
	if len(st.Channels) != 2 || st.Channels[0].Channel != "email" || st.Channels[1].Channel != "sms" {
		e.t.Fatalf("channels %+v", st.Channels)
	}
	sms := st.Channels[1]
	if sms.Retrying != 1 || sms.Dead24h != 1 || sms.ByState[store.StateDead] != 1 || sms.LastError == "" {
		e.t.Fatalf("sms stats %+v", sms)
	}
	e.sameTime(st.Channels[0].LastSentAt, start, "email last sent")
}

func deadSince(e *env) {
	kill := func(ds ...store.NewDelivery) []string {
		e.ingest(ds...)
		got := e.claim(10)
		for _, d := range got {
			e.record(d, store.Outcome{State: store.StateDead, DeadReason: "gone"})
		}
		return ids(got)
	}
	early := kill(to("email", "a@example.org"), to("sms", "+1"))
	e.advance(time.Hour)
	late := kill(to("email", "b@example.org"))
	got, more, err := e.s.DeadSince(e.ctx, start.Add(30*time.Minute), "")
	e.ok(err, "dead since")
	if !slices.Equal(got, late) || more {
		e.t.Fatalf("dead since half an hour in: %v (more %v), want %v", got, more, late)
	}
	got, _, err = e.s.DeadSince(e.ctx, start, "email")
	e.ok(err, "dead email")
	emails := []string{late[0]}
	for _, id := range early {
		if e.delivery(id).Channel == "email" {
			emails = append(emails, id)
		}
	}
	slices.Sort(got)
	slices.Sort(emails)
	if !slices.Equal(got, emails) {
		e.t.Fatalf("dead email %v, want %v", got, emails)
	}
	n, err := e.s.RetryDeadSince(e.ctx, start, "email")
	e.ok(err, "retry dead email")
	if n != 2 {
		e.t.Fatalf("retried %d, want 2", n)
	}
	for _, id := range emails {
		if d := e.delivery(id); d.State != store.StateQueued {
			e.t.Fatalf("retried %s is %s", id, d.State)
		}
	}
	if left, _, _ := e.s.DeadSince(e.ctx, start, ""); len(left) != 1 {
		e.t.Fatalf("dead left %v, want the sms", left)
	}
}

func listPages(e *env) {
	for _, id := range []string{"a1", "a2", "a3"} {
		e.ingestApproval(id, e.now().Add(time.Hour))
	}
	page, err := e.s.ListApprovals(e.ctx, "", "a1", 10)
	e.ok(err, "approvals after a1")
	if len(page) != 2 || page[0].ID != "a2" || page[1].ID != "a3" {
		e.t.Fatalf("approvals after a1: %+v", page)
	}
	var recs []string
	for i, cnv := range []string{"cnv_1", "cnv_2", "cnv_3"} {
		w, err := e.inbound("SM"+cnv, cnv, true)
		e.ok(err, "inbound")
		recs = append(recs, w.Record.ID)
		if i < 2 {
			e.advance(2 * time.Hour) // the next message starts its own conversation
		}
	}
	got, err := e.s.ListInboundRecords(e.ctx, "", 2, 100, nil)
	e.ok(err, "newest records")
	if len(got) != 2 || got[0].ID != recs[2] || got[1].ID != recs[1] {
		e.t.Fatalf("newest records %+v", got)
	}
	got, err = e.s.ListInboundRecords(e.ctx, recs[1], 10, 100, nil)
	e.ok(err, "records before the second")
	if len(got) != 1 || got[0].ID != recs[0] {
		e.t.Fatalf("records before the second: %+v", got)
	}
	got, err = e.s.ListInboundRecords(e.ctx, "", 10, 100, func(r *store.InboundRecord) bool { return r.ConversationID == "cnv_2" })
	e.ok(err, "records kept")
	if len(got) != 1 || got[0].ID != recs[1] {
		e.t.Fatalf("records of cnv_2: %+v", got)
	}
	convs, err := e.s.ListConversations(e.ctx, "", 2, 100, nil)
	e.ok(err, "latest conversations")
	if len(convs) != 2 || convs[0].ID != "cnv_3" || convs[1].ID != "cnv_2" {
		e.t.Fatalf("latest conversations %+v", convs)
	}
	convs, err = e.s.ListConversations(e.ctx, store.ConversationCursor(convs[1]), 10, 100, nil)
	e.ok(err, "conversations after the cursor")
	if len(convs) != 1 || convs[0].ID != "cnv_1" {
		e.t.Fatalf("conversations after the cursor %+v", convs)
	}
}
