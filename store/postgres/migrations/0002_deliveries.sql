-- 0002_deliveries: accepted envelopes, their deliveries (the outbox), the
-- deliveries' attempts and the provider ids that find them.

-- Ids are compared byte by byte (COLLATE "C"), whatever the database's
-- collation: listings page by id, and ids sort by creation time.

-- An accepted envelope: its body exactly as accepted, and the record
-- (store.EnvelopeRecord without the body).
CREATE TABLE envelopes (
    id         text COLLATE "C" PRIMARY KEY,
    created_ns bigint NOT NULL,
    body       bytea NOT NULL,
    doc        json NOT NULL
);

-- One delivery: one envelope to one recipient on one channel.
--
-- doc is the stored record (store.Delivery); as on the embedded store it
-- is never in state sending: a job in flight keeps its stored state
-- (queued or retrying) in doc and has lease_until_ns set. The columns
-- follow doc and the lease:
--   state: 'sending' while leased, else doc's state;
--   due_ns: when a queued or retrying job not in flight is due, else NULL;
--   conversation: the conversation of the delivery's Extra, '' for none
--   (ReleaseHeld queues a conversation's held answers).
CREATE TABLE deliveries (
    id             text COLLATE "C" PRIMARY KEY,
    envelope_id    text COLLATE "C" NOT NULL REFERENCES envelopes (id) ON DELETE CASCADE,
    channel        text COLLATE "C" NOT NULL,
    recipient      text NOT NULL,
    agent          text NOT NULL,
    state          text NOT NULL,
    due_ns         bigint,
    lease_until_ns bigint,
    -- lease_holder: the replica that holds the lease (postgres.Options
    -- Holder); when that replica's liveness lease (singleton_leases
    -- 'replica/<holder>') has run out, the job is re-queued at once rather
    -- than at the end of its own lease.
    lease_holder   text,
    created_ns     bigint NOT NULL,
    updated_ns     bigint NOT NULL,
    conversation   text NOT NULL,
    doc            json NOT NULL,
    CHECK ((state = 'sending') = (lease_until_ns IS NOT NULL)),
    CHECK ((due_ns IS NOT NULL) = (state IN ('queued', 'retrying')))
);
-- Due order per channel: a claim walks each channel's due jobs in order.
CREATE INDEX deliveries_due ON deliveries (channel, due_ns, id) WHERE due_ns IS NOT NULL;
-- Listings by state (id order), counts, dead letters.
CREATE INDEX deliveries_state ON deliveries (state, id);
-- Leases that may have run out (RequeueExpired).
CREATE INDEX deliveries_lease ON deliveries (lease_until_ns) WHERE lease_until_ns IS NOT NULL;
-- A conversation's held answers.
CREATE INDEX deliveries_held ON deliveries (conversation) WHERE state = 'held';
-- An envelope's deliveries (the cascade from envelopes), and those not
-- finished yet, which keep their envelope from Prune.
CREATE INDEX deliveries_envelope ON deliveries (envelope_id);
CREATE INDEX deliveries_unfinished ON deliveries (envelope_id) WHERE state NOT IN ('sent', 'dead');

-- A delivery's attempts. doc is json, not json: an attempt's receipt is
-- answered as it was recorded.
CREATE TABLE attempts (
    delivery_id text COLLATE "C" NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    n           integer NOT NULL,
    doc         json NOT NULL,
    PRIMARY KEY (delivery_id, n)
);

-- Provider ids (a Twilio SID, an SMTP queue id, each part of a long SMS)
-- find their delivery until it is pruned; an id a provider reuses finds
-- its latest delivery.
CREATE TABLE provider_ids (
    channel     text NOT NULL,
    pid         text NOT NULL,
    delivery_id text COLLATE "C" NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    PRIMARY KEY (channel, pid)
);
CREATE INDEX provider_ids_delivery ON provider_ids (delivery_id);
