-- Records shared by several areas, and the small ones of the core.

-- Idempotency keys of POST /v1/deliveries (deliveries.go writes them,
-- PruneRecords removes them after the retention period).
CREATE TABLE idempotency (
    key         text PRIMARY KEY,
    hash        bytea NOT NULL,
    envelope_id text NOT NULL,
    created_ns  bigint NOT NULL
);
CREATE INDEX idempotency_created ON idempotency (created_ns);

-- Inbound message ids an approval answer was handled for (approvals.go),
-- so that a repeat is recognised; pruned after the retention period.
CREATE TABLE inbound_seen (
    channel text NOT NULL,
    msg_id  text NOT NULL,
    at_ns   bigint NOT NULL,
    PRIMARY KEY (channel, msg_id)
);
CREATE INDEX inbound_seen_at ON inbound_seen (at_ns);

-- Provider callbacks acted on (MarkSeen/ForgetSeen).
CREATE TABLE callbacks_seen (
    key   text PRIMARY KEY,
    at_ns bigint NOT NULL
);
CREATE INDEX callbacks_seen_at ON callbacks_seen (at_ns);

-- Small named values (IMAP cursors, created content SIDs).
CREATE TABLE kv (
    key   text PRIMARY KEY,
    value bytea NOT NULL
);

-- Singleton leases (Leases).
CREATE TABLE singleton_leases (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    generation bigint NOT NULL,
    until_ns   bigint NOT NULL
);

-- Schedules: each schedule's state, and its runs.
CREATE TABLE schedules (
    name text PRIMARY KEY,
    doc  json NOT NULL
);
CREATE TABLE schedule_runs (
    schedule text NOT NULL,
    slot_ns  bigint NOT NULL,
    manual   boolean NOT NULL,
    state    text NOT NULL,
    doc      json NOT NULL,
    PRIMARY KEY (schedule, slot_ns, manual)
);
CREATE INDEX schedule_runs_state ON schedule_runs (state);
