// Package schedule starts agent turns on a cron schedule and delivers what
// they produce (docs/architecture.md, Schedules).
//
// # Slots and the once-per-slot guarantee
//
// A schedule's slots are the instants its cron spec names. A slot's identity
// is its UTC instant. Before a turn starts, the slot is claimed in one bbolt
// transaction (store.ClaimScheduleSlot) that writes the run record and moves
// the schedule's cursor to the slot; the store refuses a slot that already
// has a record or lies at or before the cursor. So a slot is fired at most
// once, across restarts, slow runs and clock steps in either direction: a
// clock that goes back never brings a claimed slot round again, and a
// process that dies after the claim does not fire the slot again after its
// restart (its run is recorded as failed, "interrupted"). This is at most
// once by design: a turn is never started twice for one slot.
//
// When the wall clock goes back past the cursor (by more than Grace), the
// cursor is rewound to now, so that a bogus step into the future cannot
// silence a schedule until the clock catches up. Every slot that ran, was
// skipped or was missed keeps its record, and the store refuses a slot with
// a record whatever the cursor says; the slots that become claimable again
// are the ones that never had a turn. (Records are pruned beyond the newest
// 200 per schedule; those are older than any slot a rewind reopens unless
// more than 200 slots passed in the bogus future.)
//
// A new schedule starts with its cursor at the instant it is first seen, so
// it never fires for slots before it was configured. Manual runs
// (RunNow, `beachd schedules run`) have their own identity and never take a
// cron slot.
//
// # Overlap
//
// A schedule never runs twice at once. A slot that comes while the previous
// run (all its retries included) is going is, by `overlap`: skip (default)
// recorded as skipped; queue — claimed as queued and started when the
// running one ends. At most one slot waits; further slots are skipped. So a
// hung agent costs one run and its timeout, never a pile-up. A manual run
// counts as a run: RunNow is refused (ErrBusy) from the moment another run
// is being claimed until it ends, so of simultaneous calls one starts.
//
// The scheduler's lock is never held across a store write or an agent
// call: List, Active and RunNow answer while a claim or a run record waits
// for the disk. Pause and Resume make their store write without the lock.
//
// # Downtime and catch-up
//
// The scheduler looks at the clock at each slot and at least every MaxSleep.
// A due slot noticed within Grace (default 1 minute) of its time fires
// normally. When every due slot is older than that (beachd was down, the
// machine slept, the clock jumped forward), `catch_up` decides: skip
// (default) records the latest missed slot as missed and waits for the next;
// run_once fires once for the latest missed slot, however many were missed.
// Older missed slots are never recorded one by one.
//
// # Pause and resume
//
// Pause stops a schedule firing at run time; the flag is stored with the
// schedule's state, so it holds across restarts, and the store refuses a
// cron claim of a paused schedule in the claiming transaction, so no slot
// fires once Pause has returned. Slots that come due while paused are
// skipped: Resume moves the cursor to now, so they are not caught up (whatever
// `catch_up` says) and leave no record. A run in progress goes on, and a
// manual run (RunNow) still works while paused.
//
// # Daylight saving time
//
// Specs are read in their zone (CRON_TZ=/TZ= prefix or `time_zone`, else the
// scheduler's default zone). robfig/cron v3.0.1, on which this builds, does
// this at a DST change:
//
//   - gap (spring forward, e.g. 02:00→03:00 in New York): a wall time in the
//     gap does not exist, and robfig silently skips the slot — a daily
//     "30 2 * * *" does not fire at all that day;
//   - repeat (fall back, 01:00–02:00 twice): robfig returns the wall time
//     once per pass, so "30 1 * * *" fires twice, an hour apart.
//
// beachd adds, for specs that name particular hours (the hour field does not
// match every hour — fixed-time jobs, as in cronie):
//
//   - a slot in a gap fires once at the first instant after the gap (03:00
//     EDT); several slots in one gap ("*/15 2 * * *") fire once together;
//   - in a repeated hour, a wall time fires once, on its first pass (the
//     earlier UTC instant); the second pass is not a slot.
//
// Specs whose hour field matches every hour ("*/15 * * * *", "@hourly")
// follow elapsed time instead: they fire in both passes of a repeated hour
// and robfig's slots around a gap are kept as they are (01:45 EST is
// followed by 03:00 EDT, fifteen minutes later). @every specs are plain
// intervals and know no zone.
//
// # Runs
//
// A run sends the schedule's message to its agent (a new A2A context per
// run and attempt, or the configured `session`), waits for the turn to
// settle within `timeout`, and enqueues the result envelope to the
// schedule's recipients with source "schedule:NAME". A turn that fails, times
// out, settles in an error state or answers nothing is retried `retries`
// times, `retry_delay` apart; when it fails for good and `error_notice` is
// set, an envelope with one `error` part is delivered instead. A panic in a
// run is recovered and recorded. Every step is recorded in the run record.
package schedule
