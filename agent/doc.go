// Package agent is beachd's client of Beach agents over A2A 0.3 (JSON-RPC,
// as spoken by github.com/a2aproject/a2a-go v0.3.x).
//
// It does three things: Inject sends an approval-response into a suspended
// turn (message/send with contextId = session and taskId = turn); StartTurn
// sends a new message that starts a turn; WaitTurn polls tasks/get until the
// turn settles and converts the agent's reply into a settled envelope.
//
// Errors from the agent are returned wrapped; IsPermanent tells a caller
// that retrying the same request cannot help (unknown agent, task not
// found, task already terminal, invalid parameters).
package agent
