// Package agent is beachd's client of Beach agents over A2A. It speaks both
// generations: A2A 1.0 (JSON-RPC methods SendMessage and GetTask with the
// header A2A-Version: 1.0, or the HTTP+JSON binding POST /message:send and
// GET /tasks/{id} where the agent card offers only that) and A2A 0.3
// (JSON-RPC message/send and tasks/get, kind discriminators). Both wire
// codecs are written here against the specifications and convert to one
// set of types (Message, Task, Part, …), shaped like 1.0.
//
// Which generation a target gets: a fixed version ("1.0", "0.3") is
// JSON-RPC at the configured URL. "auto" reads the agent card at the URL's
// origin (/.well-known/agent-card.json, bounded in size and time), picks
// the newest generation both sides speak, and caches the choice for an
// hour; an answer "version not supported" (or "method not found") makes it
// read the card again and retry the request once. When the card cannot be
// read, it tries 1.0 JSON-RPC at the configured URL and moves to 0.3 if
// the agent refuses; Status exposes the card error and how the choice was
// made.
//
// It does three things: Inject sends an approval-response into a suspended
// turn (contextId = session, taskId = turn); StartTurn sends a new message
// that starts a turn; WaitTurn polls the task until the turn settles and
// converts the agent's reply into a settled envelope.
//
// Errors from the agent are *Error values that match the A2A error
// taxonomy's sentinels (ErrTaskNotFound, ErrVersionNotSupported, …);
// IsPermanent tells a caller that retrying the same request cannot help.
// Every answer is bounded in size, and every decoder refuses what it
// cannot make sense of with an error naming the field.
package agent
