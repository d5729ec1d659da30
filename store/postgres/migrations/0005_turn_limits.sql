-- 0005_turn_limits
-- The counters of the flood limits across conversations (turn_limits.go):
-- one row per key (a sender's turns with an agent, all of an agent's
-- turns) holding the times (UnixNano) of the turns counted within the
-- last hour, oldest first. The row is locked by the transaction that
-- records an inbound message, so that concurrent messages on any replica
-- cannot get past a limit. last_ns is the latest turn, for pruning.
CREATE TABLE turn_limits (
    key     bytea PRIMARY KEY,
    last_ns bigint NOT NULL,
    times   bigint[] NOT NULL
);
CREATE INDEX turn_limits_last ON turn_limits (last_ns);
