package render

import (
	"github.com/cool-ai/beachd/envelope"
)

// Webhook returns the envelope as a webhook endpoint receives it: filtered
// by the registry for "webhook" and the endpoint's consumes list, setState
// always stripped, and each approval-request part for which in.Approvals
// holds a link carrying it as metadata "decisionUrl". The input envelope is
// not modified.
func (r *Renderer) Webhook(in Input) (*envelope.Envelope, error) {
	if in.Envelope == nil {
		return nil, ErrNoEnvelope
	}
	reg := in.Registry
	if reg == nil {
		reg = r.reg
	}
	f := reg.Filter(in.Envelope, envelope.ChannelWebhook, in.Consumes)
	links := map[string]string{}
	for _, h := range in.Approvals {
		if h.LinkURL != "" {
			links[h.ApprovalID] = h.LinkURL
		}
	}
	parts := make([]envelope.Part, 0, len(f.Parts))
	for _, p := range f.Parts {
		switch p.PartType() {
		case envelope.PartSetState, envelope.PartApprovalResponse:
			continue
		case envelope.PartApprovalRequest:
			var ar envelope.ApprovalRequest
			if p.DecodeData(&ar) == nil && links[ar.ApprovalID] != "" {
				md := make(map[string]any, len(p.Metadata)+1)
				for k, v := range p.Metadata {
					md[k] = v
				}
				md["decisionUrl"] = links[ar.ApprovalID]
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
