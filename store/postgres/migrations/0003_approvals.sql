-- 0003_approvals: approval requests, the token hashes that answer them,
-- their audit trail, the injection jobs that deliver decisions to agents,
-- the wrong-code guards of short codes and the once-only markers.
-- (Handled inbound message ids are inbound_seen, in 0001_core.)
--
-- Ids that lists and due orders sort by are COLLATE "C": byte order, as on
-- the embedded store, whatever the database's collation.

-- One approval (doc: store.Approval). expires_ns is the expiry of a
-- pending approval that has one, else NULL: the due order of the expiry
-- sweep.
CREATE TABLE approvals (
    id         text COLLATE "C" PRIMARY KEY,
    state      text NOT NULL,
    expires_ns bigint,
    doc        json NOT NULL,
    CHECK (expires_ns IS NULL OR state = 'pending')
);
CREATE INDEX approvals_state ON approvals (state, id);
CREATE INDEX approvals_expiry ON approvals (expires_ns, id) WHERE expires_ns IS NOT NULL;

-- A token hash and what it answers (doc: store.TokenBinding). Kept after
-- the decision: a late answer finds its approval decided.
CREATE TABLE approval_tokens (
    hash        text COLLATE "C" PRIMARY KEY,
    approval_id text NOT NULL,
    doc         json NOT NULL
);

-- An approval's audit trail (doc: store.AuditEntry), in the order of its
-- entries' times, then of writing. No foreign key: an entry may name an
-- approval that does not exist (an answer quoting an unknown id), and a
-- key check would lock the approval row against its decision.
CREATE TABLE approval_audit (
    approval_id text NOT NULL,
    at_ns       bigint NOT NULL,
    seq         bigint GENERATED ALWAYS AS IDENTITY,
    doc         json NOT NULL,
    PRIMARY KEY (approval_id, at_ns, seq)
);

-- The job that delivers a decision to its agent (doc: store.Injection).
-- The columns follow doc:
--   next_ns: NextAt of a pending job (when it is due; a claimed job is due
--            again when its lease runs out), NULL once done or dead;
--   lease_until_ns: LeasedUntil while a worker holds the job, else NULL;
--   updated_ns: UpdatedAt (a requeue after a restart compares it).
-- One decision per approval, so one job per approval.
CREATE TABLE injections (
    id             text COLLATE "C" PRIMARY KEY,
    approval_id    text NOT NULL UNIQUE,
    state          text NOT NULL,
    next_ns        bigint,
    lease_until_ns bigint,
    -- lease_holder: the replica holding the lease; a job whose holder's
    -- liveness lease ran out is claimable before its own lease ends.
    lease_holder   text,
    updated_ns     bigint NOT NULL,
    doc            json NOT NULL,
    CHECK ((next_ns IS NOT NULL) = (state = 'pending')),
    CHECK (lease_until_ns IS NULL OR state = 'pending')
);
CREATE INDEX injections_due ON injections (next_ns, id) WHERE next_ns IS NOT NULL;
CREATE INDEX injections_state ON injections (state, id);
CREATE INDEX injections_leased ON injections (updated_ns) WHERE lease_until_ns IS NOT NULL;

-- The wrong-code guard of a pending approval's short code for one number
-- on one channel (doc: store.Counter): one row per SMS or WhatsApp
-- recipient of a pending approval, removed by its decision.
CREATE TABLE approval_code_guards (
    channel     text NOT NULL,
    number      text NOT NULL,
    approval_id text COLLATE "C" NOT NULL,
    doc         json NOT NULL,
    PRIMARY KEY (channel, number, approval_id)
);

-- Once-only markers (Once: at most one reply per address per day, …;
-- doc: store.Counter).
CREATE TABLE approval_limits (
    key text PRIMARY KEY,
    doc json NOT NULL
);
