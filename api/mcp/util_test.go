package mcp

import (
	"context"
	"log/slog"
	"time"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/store"
)

var discard = slog.New(slog.DiscardHandler)

func nowFunc() time.Time { return time.Now() }

// noConversations knows no conversation.
type noConversations struct{}

func (noConversations) ListInbound(context.Context, api.InboundQuery) ([]api.InboundItem, string, error) {
	return nil, "", nil
}
func (noConversations) ListConversations(context.Context, api.ConversationQuery) ([]api.ConversationItem, string, error) {
	return nil, "", nil
}
func (noConversations) Conversation(context.Context, string) (*api.ConversationDetail, error) {
	return nil, store.ErrNotFound
}
func (noConversations) Resolve(context.Context, string) (store.NewDelivery, error) {
	return store.NewDelivery{}, store.ErrNotFound
}
func (noConversations) Transports(string) []api.Transport { return nil }
func (noConversations) OpenAttachment(context.Context, string, int, string, string) (string, string, []byte, error) {
	return "", "", nil, store.ErrNotFound
}
