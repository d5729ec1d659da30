package store

import "errors"

// Sentinel errors of the store. Match them with errors.Is.
var (
	// ErrNotFound: no record with that id.
	ErrNotFound = errors.New("not found")
	// ErrIdempotencyConflict: the idempotency key was used with another body.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")
	// ErrNewerSchema: the file was written by a newer beachd.
	ErrNewerSchema = errors.New("database schema is newer than this beachd")
	// ErrCorrupt: the file is not a readable beachd database.
	ErrCorrupt = errors.New("database file is not a readable beachd database")
	// ErrLocked: another process holds the database.
	ErrLocked = errors.New("database is in use by another process")
	// ErrBadState: the operation does not apply to the record's state.
	ErrBadState = errors.New("operation not allowed in this state")
	// ErrLeaseLost: the job was re-claimed by someone else (its lease ran out).
	ErrLeaseLost = errors.New("lease lost")
)
