-- 0007_approval_timers: the durable timers of approvals under a policy
-- (store.ApprovalTimer): a reminder to a step's people, or the escalation
-- to the next step.
--
-- One row per pending timer, named by its kind and step within its
-- approval (doc: the timer's JSON). Firing a timer deletes its row in the
-- transaction that sends its messages: whichever replica's DELETE takes the
-- row fires it, once. No foreign key, as for the trail: a key check would
-- lock the approval row against its decision.
CREATE TABLE approval_timers (
    approval_id text COLLATE "C" NOT NULL,
    name        text COLLATE "C" NOT NULL,
    due_ns      bigint NOT NULL,
    doc         json NOT NULL,
    PRIMARY KEY (approval_id, name)
);

CREATE INDEX approval_timers_due ON approval_timers (due_ns);
