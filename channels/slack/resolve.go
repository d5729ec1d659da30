package slack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Resolver turns a recipient's email address into the Slack user id it
// belongs to, once: the id is kept in the store (key slack/user/<address>)
// and read from there afterwards, by the sender and by the click that
// answers its message.
type Resolver struct {
	client *Client
	kv     store.KV
}

// NewResolver builds a resolver; client may be nil for one that only reads
// what was kept.
func NewResolver(client *Client, kv store.KV) *Resolver { return &Resolver{client: client, kv: kv} }

func userKey(email string) string { return "slack/user/" + strings.ToLower(strings.TrimSpace(email)) }

// emailKey holds, space-separated, the addresses resolved to a user.
func emailKey(user string) string { return "slack/email/" + user }

// Resolve returns addr itself for a Slack id, and the user id of an email
// address, looking it up once.
func (r *Resolver) Resolve(ctx context.Context, addr string) (string, error) {
	if !strings.Contains(addr, "@") {
		return addr, nil
	}
	if id, ok, err := r.Known(ctx, addr); err != nil {
		return "", err
	} else if ok {
		return id, nil
	}
	if r.client == nil {
		return "", errors.New("slack: no client to look the address up with")
	}
	id, err := r.client.LookupByEmail(ctx, addr)
	if err != nil {
		return "", classify(err, false)
	}
	if !envelope.SlackUser(id) {
		return "", channels.Permanent(fmt.Errorf("users.lookupByEmail answered %q, not a user id", id))
	}
	// The reverse first: a click is matched by it, and an address found
	// there without the forward key is looked up again, harmlessly.
	have, _ := r.EmailsOf(ctx, id)
	addr = strings.ToLower(strings.TrimSpace(addr))
	if !slices.Contains(have, addr) && len(have) < 16 {
		if err := r.kv.PutKV(ctx, emailKey(id), []byte(strings.Join(append(have, addr), " "))); err != nil {
			return "", fmt.Errorf("keep slack user of an address: %w", err)
		}
	}
	if err := r.kv.PutKV(ctx, userKey(addr), []byte(id)); err != nil {
		return "", fmt.Errorf("keep slack user of an address: %w", err)
	}
	return id, nil
}

// Known is the user id an address was resolved to before, if any.
func (r *Resolver) Known(ctx context.Context, addr string) (string, bool, error) {
	v, ok, err := r.kv.GetKV(ctx, userKey(addr))
	if err != nil {
		return "", false, fmt.Errorf("read slack user of an address: %w", err)
	}
	return string(v), ok && len(v) > 0, nil
}
