-- 0006_approval_events: each approval's hash-chained event trail.
--
-- One row per event (doc: store.ApprovalEvent, its JSON as written: the
-- json type keeps the text), numbered 1, 2, … per approval. The head is the
-- last event appended: an append takes the head's row lock, reads its seq
-- and hash, and writes the next event and the new head in the same
-- transaction, so appends from every replica form one chain. A trail that
-- ends before its head has lost its last events. No foreign key, as for the
-- audit trail: a key check would lock the approval row against its
-- decision.
CREATE TABLE approval_event_heads (
    approval_id text COLLATE "C" PRIMARY KEY,
    seq         bigint NOT NULL,
    hash        text NOT NULL
);

CREATE TABLE approval_events (
    approval_id text COLLATE "C" NOT NULL,
    seq         bigint NOT NULL,
    doc         json NOT NULL,
    PRIMARY KEY (approval_id, seq)
);
