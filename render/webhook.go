package render

import (
	"github.com/cool-ai/beachd/envelope"
)

// Webhook returns the envelope as a webhook endpoint receives it: filtered
// by the registry for "webhook" and the endpoint's consumes list, setState
// always stripped, and each approval-request part for which in.Approvals
// holds a handle carrying, as metadata, "decisionToken" (the endpoint's own
// token, for a signed decision at POST /v1/inbound/webhook/{endpoint}) and
// "decisionUrl" (the confirmation page, when links are on). The input
// envelope is not modified.
func (r *Renderer) Webhook(in Input) (*envelope.Envelope, error) {
	if in.Envelope == nil {
		return nil, ErrNoEnvelope
	}
	reg := in.Registry
	if reg == nil {
		reg = r.reg
	}
	f := reg.Filter(in.Envelope, envelope.ChannelWebhook, in.Consumes)
	handles := map[string]ApprovalHandle{}
	for _, h := range in.Approvals {
		if h.LinkURL != "" || h.Token != "" {
			handles[h.ApprovalID] = h
		}
	}
	parts := make([]envelope.Part, 0, len(f.Parts))
	for _, p := range f.Parts {
		switch p.PartType() {
		case envelope.PartSetState, envelope.PartApprovalResponse:
			continue
		case envelope.PartApprovalRequest:
			var ar envelope.ApprovalRequest
			if p.DecodeData(&ar) != nil {
				break
			}
			if h, ok := handles[ar.ApprovalID]; ok {
				md := make(map[string]any, len(p.Metadata)+2)
				for k, v := range p.Metadata {
					md[k] = v
				}
				if h.Token != "" {
					md["decisionToken"] = h.Token
				}
				if h.LinkURL != "" {
					md["decisionUrl"] = h.LinkURL
				}
				p.Metadata = md
			}
		}
		parts = append(parts, p)
	}
	f.Parts = parts
	if len(parts) == 0 {
		return nil, ErrEmpty
	}
	return f, nil
}
