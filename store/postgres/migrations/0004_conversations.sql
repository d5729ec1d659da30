-- 0004_conversations
-- Inbound messages, the conversations they belong to, and the turns they
-- queue for the agents (conversations.go). Ids beachd makes sort bytewise
-- (COLLATE "C"), as the embedded store's keys do; keys made of what a
-- provider sent (message ids, thread keys) are bytea, since they may hold
-- bytes text refuses.

-- Conversations; updated_ns orders them by activity (ListConversations).
CREATE TABLE conversations (
    id         text COLLATE "C" PRIMARY KEY,
    updated_ns bigint NOT NULL,
    doc        json NOT NULL
);
CREATE INDEX conversations_activity ON conversations (updated_ns, id);

-- SMS/WhatsApp thread key (channel, our number, their number) → the
-- thread's latest conversation.
CREATE TABLE conversation_threads (
    key             bytea PRIMARY KEY,
    conversation_id text COLLATE "C" NOT NULL
);

-- Email Message-ID (no brackets) received → its conversation.
CREATE TABLE conversation_msgids (
    msg_id          bytea PRIMARY KEY,
    conversation_id text COLLATE "C" NOT NULL
);

-- A conversation's messages both ways ('in': inbound record id, 'out':
-- delivery id) in time order.
CREATE TABLE conversation_messages (
    conversation_id text COLLATE "C" NOT NULL,
    at_ns           bigint NOT NULL,
    direction       text COLLATE "C" NOT NULL CHECK (direction IN ('in', 'out')),
    id              text COLLATE "C" NOT NULL,
    PRIMARY KEY (conversation_id, at_ns, direction, id)
);

-- Inbound records. (channel, msg_id) is unique: a message delivered twice
-- is recorded once. msg_id is NULL for a message without one.
CREATE TABLE inbound_records (
    id          text COLLATE "C" PRIMARY KEY,
    channel     text NOT NULL,
    msg_id      bytea,
    received_ns bigint NOT NULL,
    doc         json NOT NULL,
    UNIQUE (channel, msg_id)
);

-- Stored attachment bytes of inbound records.
CREATE TABLE inbound_attachments (
    inbound_id text COLLATE "C" NOT NULL,
    n          integer NOT NULL,
    data       bytea NOT NULL,
    PRIMARY KEY (inbound_id, n)
);

-- Turns. due_ns is when a queued or sending turn is due (a sending turn's
-- lease end), NULL once it is answered or dead.
CREATE TABLE turns (
    id              text COLLATE "C" PRIMARY KEY,
    conversation_id text COLLATE "C" NOT NULL,
    state           text NOT NULL,
    due_ns          bigint,
    lease_until_ns  bigint NOT NULL,
    -- lease_holder: the replica a sending turn is leased to; once that
    -- replica's liveness lease ran out the turn is claimable at once.
    lease_holder    text,
    doc             json NOT NULL,
    CHECK ((state IN ('queued', 'sending')) = (due_ns IS NOT NULL))
);
CREATE INDEX turns_due ON turns (due_ns, id) WHERE due_ns IS NOT NULL;
CREATE INDEX turns_sending ON turns (conversation_id) WHERE state = 'sending';
CREATE INDEX turns_state ON turns (state, id);
