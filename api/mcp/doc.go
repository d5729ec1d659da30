// Package mcp is beachd's MCP server: the tools an agent calls to reach
// people through beachd (send_message, get_delivery, ask_for_approval,
// get_approval, list_conversations, read_conversation,
// reply_to_conversation), served at /mcp over MCP's Streamable HTTP
// transport with the official Go SDK (docs/mcp.md).
//
// Each tool is a thin layer over what the HTTP API calls: messages are
// stored by the API's Ingester (the same validation, limits, approvers and
// idempotency), deliveries read by api.LookupDelivery, approvals by the
// approvals service, conversations through api.Conversations with the
// API's parameter checks. A tool's bad arguments, an unknown id, a body
// over the limits or any other failure is a tool result with isError and
// a text naming every problem (api.DescribeError, as the API's error
// bodies), never a protocol error that would drop the caller's session.
//
// The transport is stateless (no Mcp-Session-Id): any replica answers any
// call, and a restart loses nothing a client holds. The route takes the
// API's bearer keys (api.Route with Auth); a read-only key is refused, as
// on every POST.
//
// An approval asked by ask_for_approval belongs to no suspended turn: its
// session is Session, and the daemon's injector takes its decision as
// delivered without calling the agent; get_approval reads
// the decision.
package mcp
