package store

import (
	"errors"
	"time"
)

// Schedule run states.
const (
	RunQueued    = "queued"    // claimed; waits for the schedule's previous run (overlap: queue)
	RunRunning   = "running"   // claimed; the turn is in progress
	RunRetrying  = "retrying"  // an attempt failed; another follows after the retry delay
	RunSucceeded = "succeeded" // the result envelope was enqueued
	RunFailed    = "failed"    // every attempt failed, or the run was interrupted
	RunSkipped   = "skipped"   // the slot came while the previous run was still going (overlap: skip)
	RunMissed    = "missed"    // the slot passed while beachd was down (catch_up: skip)
)

// Run triggers. A cron and a catch-up run share the slot's identity (key
// byte 'c'); a manual run has its own ('m'), so that an operator's "run now"
// never takes a cron slot away.
const (
	TriggerCron    = "cron"
	TriggerCatchUp = "catch-up"
	TriggerManual  = "manual"
)

// ErrSlotTaken: the slot was already claimed (or lies at or before the
// schedule's cursor). It is how the store enforces "once per slot".
var ErrSlotTaken = errors.New("schedule slot already claimed")

// ErrSchedulePaused: a cron or catch-up slot was refused because an operator
// paused the schedule. A manual run is not refused.
var ErrSchedulePaused = errors.New("schedule is paused")

// ScheduleState is what survives a restart about a schedule.
type ScheduleState struct {
	Name string `json:"name"`
	// Cursor is the latest cron slot claimed (run, skipped or missed), or the
	// instant the schedule was first seen. Slots at or before it are never
	// claimed again.
	Cursor    time.Time `json:"cursor"`
	FirstSeen time.Time `json:"firstSeen"`
	// Paused: an operator paused the schedule; no cron slot is claimed until
	// it is resumed. PausedAt and PausedBy (the API key's name, or "console")
	// say since when and by whom. Records written before these fields existed
	// decode as not paused.
	Paused   bool      `json:"paused,omitempty"`
	PausedAt time.Time `json:"pausedAt,omitzero"`
	PausedBy string    `json:"pausedBy,omitempty"`
}

// ScheduleRun is one claimed slot of a schedule and what became of it.
type ScheduleRun struct {
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
	// PushID is the in-flight turn's A2A push id (agent.Turn.PushID), kept
	// with TaskID so that a resumed turn accepts the agent's pushes again.
	PushID     string `json:"pushId,omitempty"`
	EnvelopeID string `json:"envelopeId,omitempty"`
	// AnsweredBy says how the agent's answer arrived: send (the answer to
	// the message itself), push (an A2A push notification) or poll.
	AnsweredBy string `json:"answeredBy,omitempty"`
	// ErrorNoticeID is the envelope id of the error notice sent for a failed run.
	ErrorNoticeID string `json:"errorNoticeId,omitempty"`
}

// ID names the run: schedule@slot (RFC 3339, UTC), with "/manual" for an
// operator's run.
func (r ScheduleRun) ID() string {
	id := r.Schedule + "@" + r.Slot.UTC().Format(time.RFC3339Nano)
	if r.Trigger == TriggerManual {
		id += "/manual"
	}
	return id
}

// Finished reports whether the run reached a final state.
func (r ScheduleRun) Finished() bool {
	switch r.State {
	case RunSucceeded, RunFailed, RunSkipped, RunMissed:
		return true
	}
	return false
}

// SetPaused pauses (paused true) or resumes the schedule at now and
// reports whether that changed it. Pausing a paused schedule keeps the
// first PausedAt and PausedBy. Resuming moves the cursor forward to now, so
// that the slots that came due while the schedule was paused are skipped
// rather than caught up.
func (st *ScheduleState) SetPaused(paused bool, by string, now time.Time) bool {
	switch {
	case paused == st.Paused:
		return false
	case paused:
		st.Paused, st.PausedAt, st.PausedBy = true, now, by
	default:
		st.Paused, st.PausedAt, st.PausedBy = false, time.Time{}, ""
		if st.Cursor.Before(now) {
			st.Cursor = now
		}
	}
	return true
}
