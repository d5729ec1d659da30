// Package agent is beachd's client of Beach agents over A2A. It speaks both
// generations: A2A 1.0 (JSON-RPC methods SendMessage and GetTask with the
// header A2A-Version: 1.0, or the HTTP+JSON binding POST /message:send and
// GET /tasks/{id} where the agent card offers only that) and A2A 0.3
// (JSON-RPC message/send and tasks/get, kind discriminators). Both wire
// codecs are written here against the specifications and convert to one
// set of types (Message, Task, Part, …), shaped like 1.0.
//
// Which generation and binding a target gets: what the configuration
// fixes (Target.Version, Target.Binding) is used as it is, and the agent
// card at the URL's origin (/.well-known/agent-card.json, bounded in size
// and time) decides the rest: with the version on "auto", the newest
// generation both sides speak; with "1.0" and the binding on auto, the
// binding (JSON-RPC preferred). A fixed "0.3", or "1.0" with a fixed
// binding, is the configured URL without a card. A card's choice is kept
// for an hour; an answer "version not supported" (or "method not found")
// makes the client read the card again and retry the request once. When
// the card cannot be read, a fixed 1.0 is JSON-RPC at the configured URL;
// auto tries 1.0 there and moves to 0.3 if the agent refuses. Status
// exposes the card error and how the choice was made.
//
// What beachd sends an agent — the configured headers (credentials,
// often), decisions, messages — goes to the configured URL's origin and
// nowhere else: a card's endpoints on other origins are not used (the
// card error says so), a redirect is never followed (a *RedirectError,
// permanent), and each target's connections are dialled by
// fetch.EndpointClient — the configured host:port, or else only public
// addresses, checked after resolution.
//
// It does these things: Inject sends an approval-response into a
// suspended turn (contextId = session, taskId = turn, messageId stable per
// approval: InjectMessageID); HasDecision tells whether the agent's task
// already holds such a decision (a retry refused because the first
// attempt got through); StartTurn and SendMessage send a new message that
// starts a turn; WaitTurn polls the task until the turn settles and
// converts the agent's reply into a settled envelope.
//
// Errors from the agent are *Error values that match the A2A error
// taxonomy's sentinels (ErrTaskNotFound, ErrVersionNotSupported, …);
// IsPermanent tells a caller that retrying the same request cannot help.
// Every answer is bounded in size, and every decoder refuses what it
// cannot make sense of with an error naming the field.
package agent
