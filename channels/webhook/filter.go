package webhook

import (
	"errors"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
)

// RegistryFilter keeps the parts the registry delivers on the webhook
// channel to a peer with the endpoint's consumes list.
func RegistryFilter(reg *envelope.Registry) Filter {
	return func(job *channels.Job, ep *Endpoint) (*envelope.Envelope, error) {
		return reg.Filter(job.Envelope, envelope.ChannelWebhook, ep.Consumes), nil
	}
}

// RenderFilter filters through the renderer, which keeps the same parts as
// RegistryFilter and adds to each approval request the link of its decision
// page (metadata.decisionUrl) when the job carries approval handles. An
// envelope with nothing left for the endpoint is still sent (its meta says
// the turn settled), as RegistryFilter would leave it.
func RenderFilter(r *render.Renderer, reg *envelope.Registry) Filter {
	return func(job *channels.Job, ep *Endpoint) (*envelope.Envelope, error) {
		env, err := r.Webhook(render.Input{
			Envelope:   job.Envelope,
			Registry:   reg,
			Recipient:  render.Recipient{Channel: envelope.ChannelWebhook, Address: ep.Name},
			DeliveryID: job.Delivery.ID,
			Approvals:  job.Approvals,
			Consumes:   ep.Consumes,
		})
		if errors.Is(err, render.ErrEmpty) {
			return reg.Filter(job.Envelope, envelope.ChannelWebhook, ep.Consumes), nil
		}
		return env, err
	}
}
