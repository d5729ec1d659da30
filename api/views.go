package api

import (
	"encoding/json"
	"time"

	"github.com/cool-ai/beachd/approvals"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/schedule"
	"github.com/cool-ai/beachd/store"
)

// The JSON the API writes about stored records is the types below, not the
// records: the store's structs may change shape, and a field the store
// gains shows in the API only once it is added here. Each type has a
// function that builds it from its record; testdata/views pins the JSON.

// DeliveryItem is the JSON view of one delivery.
type DeliveryItem struct {
	ID         string `json:"id"`
	EnvelopeID string `json:"envelopeId"`
	Channel    string `json:"channel"`
	// To is the address (email), E.164 number (sms, whatsapp) or endpoint
	// name (webhook).
	To             string            `json:"to"`
	Agent          string            `json:"agent,omitempty"`
	State          string            `json:"state"`
	Attempts       int               `json:"attempts"`
	CreatedAt      time.Time         `json:"createdAt"`
	UpdatedAt      time.Time         `json:"updatedAt"`
	NextAttemptAt  time.Time         `json:"nextAttemptAt,omitzero"`
	LeaseUntil     time.Time         `json:"leaseUntil,omitzero"`
	SentAt         time.Time         `json:"sentAt,omitzero"`
	LastError      string            `json:"lastError,omitempty"`
	DeadReason     string            `json:"deadReason,omitempty"`
	ProviderID     string            `json:"providerId,omitempty"`
	MaybeSent      bool              `json:"maybeSent,omitempty"`
	ProviderStatus string            `json:"providerStatus,omitempty"`
	ApprovalIDs    []string          `json:"approvalIds,omitempty"`
	Extra          map[string]string `json:"extra,omitempty"`
}

func deliveryItem(d *store.Delivery) DeliveryItem {
	return DeliveryItem{ID: d.ID, EnvelopeID: d.EnvelopeID, Channel: d.Channel, To: d.To, Agent: d.Agent,
		State: string(d.State), Attempts: d.Attempts, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
		NextAttemptAt: d.NextAttemptAt, LeaseUntil: d.LeaseUntil, SentAt: d.SentAt, LastError: d.LastError,
		DeadReason: d.DeadReason, ProviderID: d.ProviderID, MaybeSent: d.MaybeSent, ProviderStatus: d.ProviderStatus,
		ApprovalIDs: d.ApprovalIDs, Extra: d.Extra}
}

// deliveryItems views ds; an empty list is [], never null.
func deliveryItems(ds []*store.Delivery) []DeliveryItem {
	out := make([]DeliveryItem, 0, len(ds))
	for _, d := range ds {
		out = append(out, deliveryItem(d))
	}
	return out
}

// AttemptItem is the JSON view of one try of a delivery.
type AttemptItem struct {
	N        int           `json:"n"`
	At       time.Time     `json:"at"`
	Duration time.Duration `json:"durationNs"`
	Outcome  string        `json:"outcome"` // sent, retry, dead
	Error    string        `json:"error,omitempty"`
	// Receipt is the result envelope: {"data": …, "meta": {"source": …}}.
	Receipt json.RawMessage `json:"receipt,omitempty"`
}

// attemptItems views as; an empty log is [], never null.
func attemptItems(as []store.Attempt) []AttemptItem {
	out := make([]AttemptItem, 0, len(as))
	for _, a := range as {
		out = append(out, AttemptItem{N: a.N, At: a.At, Duration: a.Duration, Outcome: a.Outcome, Error: a.Error, Receipt: a.Receipt})
	}
	return out
}

// DeliveryView is a delivery with its attempts.
type DeliveryView struct {
	DeliveryItem
	AttemptLog []AttemptItem `json:"attemptLog"`
}

// deliveryViewOf views d with its attempts.
func deliveryViewOf(d *store.Delivery, atts []store.Attempt) DeliveryView {
	return DeliveryView{DeliveryItem: deliveryItem(d), AttemptLog: attemptItems(atts)}
}

// EnvelopeView is an envelope's deliveries.
type EnvelopeView struct {
	ID         string          `json:"id"`
	CreatedAt  time.Time       `json:"createdAt"`
	Agent      string          `json:"agent,omitempty"`
	Source     string          `json:"source,omitempty"`
	Envelope   json.RawMessage `json:"envelope"`
	Deliveries []DeliveryView  `json:"deliveries"`
}

// envelopeView views rec, without its deliveries yet ([]).
func envelopeView(rec *store.EnvelopeRecord) EnvelopeView {
	return EnvelopeView{ID: rec.ID, CreatedAt: rec.CreatedAt, Agent: rec.Agent, Source: rec.Source, Envelope: rec.Envelope,
		Deliveries: []DeliveryView{}}
}

// DeliveryStatsView is the overview of GET /v1/deliveries/stats: queue
// depth by state, rates and dead letters, overall and per channel.
type DeliveryStatsView struct {
	At         time.Time          `json:"at"`
	ByState    map[string]int     `json:"byState"`
	Channels   []ChannelStatsItem `json:"channels"`
	Created1h  int                `json:"created1h"`
	Created24h int                `json:"created24h"`
	Sent1h     int                `json:"sent1h"`
	Sent24h    int                `json:"sent24h"`
	Dead1h     int                `json:"dead1h"`
	Dead24h    int                `json:"dead24h"`
	Dead       int                `json:"dead"`
	// Truncated: the store scanned only the newest deliveries.
	Truncated bool `json:"truncated,omitempty"`
}

// ChannelStatsItem is one channel's counts.
type ChannelStatsItem struct {
	Channel     string         `json:"channel"`
	ByState     map[string]int `json:"byState"`
	Sent1h      int            `json:"sent1h"`
	Sent24h     int            `json:"sent24h"`
	Dead1h      int            `json:"dead1h"`
	Dead24h     int            `json:"dead24h"`
	Retrying    int            `json:"retrying"`
	LastError   string         `json:"lastError,omitempty"`
	LastErrorAt time.Time      `json:"lastErrorAt,omitzero"`
	LastSentAt  time.Time      `json:"lastSentAt,omitzero"`
}

func deliveryStatsView(st *store.DeliveryStats) DeliveryStatsView {
	v := DeliveryStatsView{At: st.At, ByState: stateCounts(st.ByState), Created1h: st.Created1h, Created24h: st.Created24,
		Sent1h: st.Sent1h, Sent24h: st.Sent24h, Dead1h: st.Dead1h, Dead24h: st.Dead24h, Dead: st.Dead, Truncated: st.Truncated}
	if st.Channels != nil {
		v.Channels = make([]ChannelStatsItem, 0, len(st.Channels))
	}
	for _, c := range st.Channels {
		v.Channels = append(v.Channels, ChannelStatsItem{Channel: c.Channel, ByState: stateCounts(c.ByState),
			Sent1h: c.Sent1h, Sent24h: c.Sent24h, Dead1h: c.Dead1h, Dead24h: c.Dead24h, Retrying: c.Retrying,
			LastError: c.LastError, LastErrorAt: c.LastErrorAt, LastSentAt: c.LastSentAt})
	}
	return v
}

// stateCounts keys counts by the state's name; nil stays nil.
func stateCounts(m map[store.State]int) map[string]int {
	if m == nil {
		return nil
	}
	out := make(map[string]int, len(m))
	for st, n := range m {
		out[string(st)] = n
	}
	return out
}

// ApprovalView is the JSON view of an approval: the record, a one-line
// summary, its audit trail and the injection of its decision.
type ApprovalView struct {
	ID         string          `json:"id"`
	EnvelopeID string          `json:"envelopeId"`
	Agent      string          `json:"agent,omitempty"`
	Request    json.RawMessage `json:"request"`
	Session    string          `json:"session,omitempty"`
	Turn       string          `json:"turn,omitempty"`
	State      string          `json:"state"`
	CreatedAt  time.Time       `json:"createdAt"`
	ExpiresAt  time.Time       `json:"expiresAt"`
	DecidedAt  time.Time       `json:"decidedAt,omitzero"`
	DecidedBy  string          `json:"decidedBy,omitempty"`
	Channel    string          `json:"channel,omitempty"`
	MessageID  string          `json:"messageId,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	// Recipients are who was asked, on which channel; never their secrets.
	Recipients  []ApprovalRecipientItem `json:"recipients,omitempty"`
	InjectionID string                  `json:"injectionId,omitempty"`
	Summary     string                  `json:"summary"`
	Audit       []AuditItem             `json:"audit,omitempty"`
	Injection   *InjectionView          `json:"injection,omitempty"`
	// Policy is the approval policy that governs the approval; Quorum and
	// Votes where it counts votes.
	Policy string     `json:"policy,omitempty"`
	Quorum int        `json:"quorum,omitempty"`
	Votes  []VoteItem `json:"votes,omitempty"`
}

// ApprovalRecipientItem is one (recipient, channel) an approval was sent to;
// under a policy, the person it reaches and the step (from 0) that asked.
type ApprovalRecipientItem struct {
	Channel string `json:"channel"`
	Address string `json:"address"`
	Person  string `json:"person,omitempty"`
	Step    int    `json:"step,omitempty"`
}

// VoteItem is one person's vote counted toward a policy's quorum.
type VoteItem struct {
	Person   string    `json:"person"`
	Channel  string    `json:"channel"`
	Decision string    `json:"decision"`
	At       time.Time `json:"at"`
}

// AuditItem is one event of an approval's audit trail.
type AuditItem struct {
	At         time.Time `json:"at"`
	ApprovalID string    `json:"approvalId"`
	Event      string    `json:"event"`
	Channel    string    `json:"channel,omitempty"`
	Actor      string    `json:"actor,omitempty"`
	MessageID  string    `json:"messageId,omitempty"`
	Decision   string    `json:"decision,omitempty"`
	Detail     string    `json:"detail,omitempty"`
}

func approvalView(v *approvals.View) ApprovalView {
	a := &v.Approval
	out := ApprovalView{ID: a.ID, EnvelopeID: a.EnvelopeID, Agent: a.Agent, Request: a.Request, Session: a.Session,
		Turn: a.Turn, State: a.State, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt, DecidedAt: a.DecidedAt,
		DecidedBy: a.DecidedBy, Channel: a.Channel, MessageID: a.MessageID, Reason: a.Reason,
		InjectionID: a.InjectionID, Summary: v.Summary, Injection: injectionView(v.Injection)}
	for _, r := range a.Recipients {
		out.Recipients = append(out.Recipients, ApprovalRecipientItem{Channel: r.Channel, Address: r.Address, Person: r.Person, Step: r.Step})
	}
	out.Policy, out.Quorum = a.Policy, a.Quorum
	for _, v := range a.Votes {
		out.Votes = append(out.Votes, VoteItem{Person: v.Person, Channel: v.Channel, Decision: v.Decision, At: v.At})
	}
	for _, e := range v.Audit {
		out.Audit = append(out.Audit, AuditItem{At: e.At, ApprovalID: e.ApprovalID, Event: e.Event, Channel: e.Channel,
			Actor: e.Actor, MessageID: e.MessageID, Decision: e.Decision, Detail: e.Detail})
	}
	return out
}

// EventsView is the answer of GET /v1/approvals/{approvalId}/events: the
// approval's event trail, oldest first, each event exactly as stored and
// hashed ({seq, at, kind, actor, channel, evidence, prevHash, hash}: hash is
// the hex SHA-256 of the event without hash as RFC 8785 canonical JSON), the
// head the store recorded beside it, and whether the server found the
// chain intact; when not, Problem names the first bad position.
type EventsView struct {
	ApprovalID string                  `json:"approvalId"`
	Events     []store.ApprovalEvent   `json:"events"`
	Head       store.ApprovalEventHead `json:"head"`
	Verified   bool                    `json:"verified"`
	Problem    *ChainProblem           `json:"problem,omitempty"`
}

// ChainProblem is where a trail stops verifying, and why.
type ChainProblem struct {
	Position int    `json:"position"`
	Reason   string `json:"reason"`
}

func eventsView(t *approvals.Trail) EventsView {
	out := EventsView{ApprovalID: t.ApprovalID, Events: t.Events, Head: t.Head, Verified: t.Problem == nil}
	if out.Events == nil {
		out.Events = []store.ApprovalEvent{}
	}
	if t.Problem != nil {
		out.Problem = &ChainProblem{Position: t.Problem.Position, Reason: t.Problem.Reason}
	}
	return out
}

// approvalViews views vs; nil stays nil.
func approvalViews(vs []*approvals.View) []ApprovalView {
	if vs == nil {
		return nil
	}
	out := make([]ApprovalView, 0, len(vs))
	for _, v := range vs {
		out = append(out, approvalView(v))
	}
	return out
}

// InjectionView is the JSON view of the job that hands a decision to the
// agent.
type InjectionView struct {
	ID         string                    `json:"id"`
	ApprovalID string                    `json:"approvalId"`
	Agent      string                    `json:"agent"`
	Session    string                    `json:"session"`
	Turn       string                    `json:"turn"`
	Response   envelope.ApprovalResponse `json:"response"`
	State      string                    `json:"state"`
	Attempts   int                       `json:"attempts"`
	Claims     int                       `json:"claims"`
	// LeasedUntil is set while a worker holds the job.
	LeasedUntil time.Time `json:"leasedUntil,omitzero"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	NextAt      time.Time `json:"nextAt,omitzero"`
	DoneAt      time.Time `json:"doneAt,omitzero"`
	LastError   string    `json:"lastError,omitempty"`
}

// injectionView views inj; nil stays nil.
func injectionView(inj *store.Injection) *InjectionView {
	if inj == nil {
		return nil
	}
	return &InjectionView{ID: inj.ID, ApprovalID: inj.ApprovalID, Agent: inj.Agent, Session: inj.Session, Turn: inj.Turn,
		Response: inj.Response, State: inj.State, Attempts: inj.Attempts, Claims: inj.Claims, LeasedUntil: inj.LeasedUntil,
		CreatedAt: inj.CreatedAt, UpdatedAt: inj.UpdatedAt, NextAt: inj.NextAt, DoneAt: inj.DoneAt, LastError: inj.LastError}
}

// ScheduleView is the JSON view of a schedule: its definition, whether it
// runs or is paused, its next slot and its recent runs, newest first.
type ScheduleView struct {
	Name     string    `json:"name"`
	Cron     string    `json:"cron"`
	TimeZone string    `json:"timeZone,omitempty"`
	Agent    string    `json:"agent"`
	Enabled  bool      `json:"enabled"`
	CatchUp  string    `json:"catchUp"`
	Overlap  string    `json:"overlap"`
	Running  bool      `json:"running"`
	Paused   bool      `json:"paused"`
	PausedAt time.Time `json:"pausedAt,omitzero"`
	PausedBy string    `json:"pausedBy,omitempty"`
	// Next is the next slot (none for a disabled or paused schedule).
	Next time.Time `json:"next,omitzero"`
	// Last is the latest run (of any state); LastOutcome the state of the
	// latest finished one.
	Last        *RunView  `json:"last,omitempty"`
	LastOutcome string    `json:"lastOutcome,omitempty"`
	Recent      []RunView `json:"recent"`
}

func scheduleView(st schedule.Status) ScheduleView {
	v := ScheduleView{Name: st.Name, Cron: st.Cron, TimeZone: st.TimeZone, Agent: st.Agent, Enabled: st.Enabled,
		CatchUp: st.CatchUp, Overlap: st.Overlap, Running: st.Running, Paused: st.Paused, PausedAt: st.PausedAt,
		PausedBy: st.PausedBy, Next: st.Next, LastOutcome: st.LastOutcome}
	if st.Last != nil {
		last := runView(st.Last.ID, st.Last.ScheduleRun)
		v.Last = &last
	}
	if st.Recent != nil {
		v.Recent = make([]RunView, 0, len(st.Recent))
	}
	for _, r := range st.Recent {
		v.Recent = append(v.Recent, runView(r.ID, r.ScheduleRun))
	}
	return v
}

// scheduleViews views sts; nil stays nil.
func scheduleViews(sts []schedule.Status) []ScheduleView {
	if sts == nil {
		return nil
	}
	out := make([]ScheduleView, 0, len(sts))
	for _, st := range sts {
		out = append(out, scheduleView(st))
	}
	return out
}

// RunView is the JSON view of one run of a schedule, with its id.
type RunView struct {
	ID       string    `json:"id"`
	Schedule string    `json:"schedule"`
	Slot     time.Time `json:"slot"`
	Trigger  string    `json:"trigger"`
	State    string    `json:"state"`
	// Reason says why the run failed, was skipped or missed.
	Reason     string    `json:"reason,omitempty"`
	Attempts   int       `json:"attempts"`
	ClaimedAt  time.Time `json:"claimedAt"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	ContextID  string    `json:"contextId,omitempty"`
	TaskID     string    `json:"taskId,omitempty"`
	EnvelopeID string    `json:"envelopeId,omitempty"`
	// AnsweredBy says how the agent's answer arrived: send (the answer to
	// the message itself), push (an A2A push notification) or poll.
	AnsweredBy string `json:"answeredBy,omitempty"`
	// ErrorNoticeID is the envelope id of the error notice sent for a
	// failed run.
	ErrorNoticeID string `json:"errorNoticeId,omitempty"`
}

// runView views run under id (schedule.View's id: schedule@slot).
func runView(id string, run store.ScheduleRun) RunView {
	return RunView{ID: id, Schedule: run.Schedule, Slot: run.Slot, Trigger: run.Trigger, State: run.State,
		Reason: run.Reason, Attempts: run.Attempts, ClaimedAt: run.ClaimedAt, StartedAt: run.StartedAt,
		FinishedAt: run.FinishedAt, ContextID: run.ContextID, TaskID: run.TaskID, EnvelopeID: run.EnvelopeID,
		AnsweredBy: run.AnsweredBy, ErrorNoticeID: run.ErrorNoticeID}
}
