// Package store is the storage contract of beachd: the records it keeps
// (deliveries, approvals, injections, inbound messages, conversations,
// turns, schedule runs, leases), their states and errors, the rules every
// backend shares (the claim rules, ids, filters) and the interfaces a
// backend fulfils (Store and its parts). The backends live below it:
// store/bolt (an embedded bbolt file) and store/postgres. The rest of
// beachd takes these interfaces, never a backend's concrete type.
package store
