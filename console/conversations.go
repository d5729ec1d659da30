package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/store"
)

// Conversations is what the console reads of the conversations router:
// the Conversations and Inbound screens.
type Conversations interface {
	ListInbound(ctx context.Context, q api.InboundQuery) ([]api.InboundItem, string, error)
	ListConversations(ctx context.Context, q api.ConversationQuery) ([]api.ConversationItem, string, error)
	Conversation(ctx context.Context, id string) (*api.ConversationDetail, error)
}

var _ Conversations = api.Conversations(nil)

// pageSize is how many rows a conversations or inbound page shows.
const pageSize = 50

// listQuery is the query of a list screen without the console's own
// parameters, with the page size unless one is given.
func listQuery(r *http.Request) url.Values {
	q := url.Values{}
	for k, v := range r.URL.Query() {
		if k == "done" || len(v) == 0 || v[0] == "" && len(v) == 1 {
			continue // an empty filter field is no filter
		}
		q[k] = v
	}
	if q.Get("limit") == "" {
		q.Set("limit", strconv.Itoa(pageSize))
	}
	return q
}

// problemText joins the problems of a validation error into one sentence.
func problemText(err error) string {
	var verr *envelope.ValidationError
	if !errors.As(err, &verr) {
		return err.Error()
	}
	s := ""
	for _, p := range verr.Problems {
		s += p.Path + ": " + p.Reason + ". "
	}
	return s
}

type conversationsData struct {
	Filter        url.Values
	Channels      []string
	Conversations []api.ConversationItem
	Next          string
	Problem       string
}

func (c *Console) conversationsPage(w http.ResponseWriter, r *http.Request, id identity) {
	if c.deps.Conversations == nil {
		c.fail(w, r, id, http.StatusNotFound, "Conversations are not enabled on this beachd.")
		return
	}
	q := listQuery(r)
	d := conversationsData{Filter: q, Channels: api.InboundChannels}
	cq, err := api.ParseConversationQuery(q, nil)
	if err != nil {
		d.Problem = problemText(err)
		c.render(w, http.StatusBadRequest, "conversations", c.newPage(r, id, "conversations", "Conversations", d))
		return
	}
	d.Conversations, d.Next, err = c.deps.Conversations.ListConversations(r.Context(), cq)
	if err != nil {
		c.internal(w, r, id, err)
		return
	}
	c.render(w, http.StatusOK, "conversations", c.newPage(r, id, "conversations", "Conversations", d))
}

func (c *Console) conversationPage(w http.ResponseWriter, r *http.Request, id identity) {
	if c.deps.Conversations == nil {
		c.fail(w, r, id, http.StatusNotFound, "Conversations are not enabled on this beachd.")
		return
	}
	cid := r.PathValue("id")
	if !api.ValidID(cid, "cnv_") {
		c.internal(w, r, id, store.ErrNotFound)
		return
	}
	d, err := c.deps.Conversations.Conversation(r.Context(), cid)
	if err != nil {
		c.internal(w, r, id, err)
		return
	}
	title := "Conversation with " + d.Conversation.ID
	if len(d.Conversation.Participants) > 0 {
		title = "Conversation with " + d.Conversation.Participants[0]
	}
	c.render(w, http.StatusOK, "conversation", c.newPage(r, id, "conversations", title, d))
}

type inboundData struct {
	Filter       url.Values
	Channels     []string
	Dispositions []string
	Inbound      []api.InboundItem
	Next         string
	Problem      string
}

func (c *Console) inboundPage(w http.ResponseWriter, r *http.Request, id identity) {
	if c.deps.Conversations == nil {
		c.fail(w, r, id, http.StatusNotFound, "Conversations are not enabled on this beachd.")
		return
	}
	q := listQuery(r)
	d := inboundData{Filter: q, Channels: api.InboundChannels, Dispositions: api.Dispositions}
	iq, err := api.ParseInboundQuery(q, nil)
	if err != nil {
		d.Problem = problemText(err)
		c.render(w, http.StatusBadRequest, "inbound", c.newPage(r, id, "inbound", "Inbound", d))
		return
	}
	d.Inbound, d.Next, err = c.deps.Conversations.ListInbound(r.Context(), iq)
	if err != nil {
		c.internal(w, r, id, err)
		return
	}
	c.render(w, http.StatusOK, "inbound", c.newPage(r, id, "inbound", "Inbound", d))
}
