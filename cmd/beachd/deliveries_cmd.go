package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/cool-ai/beachd/api"
)

// DeliveriesCmd groups delivery commands.
type DeliveriesCmd struct {
	List  DeliveriesListCmd  `cmd:"" help:"List deliveries, optionally by state."`
	Show  DeliveriesShowCmd  `cmd:"" help:"Show an envelope's deliveries (env_…) or one delivery (dlv_…) with its attempts."`
	Retry DeliveriesRetryCmd `cmd:"" help:"Retry a dead delivery (dlv_…) or every dead delivery of an envelope (env_…)."`
}

// DeliveriesListCmd lists deliveries.
type DeliveriesListCmd struct {
	apiFlags
	State string `help:"queued, sending, sent, retrying or dead." enum:",queued,sending,sent,retrying,dead" default:""`
	Limit int    `default:"100" help:"At most this many."`
	JSON  bool   `name:"json" help:"Print JSON."`
}

// Run lists deliveries.
func (c *DeliveriesListCmd) Run(g *globals) error {
	q := url.Values{}
	if c.State != "" {
		q.Set("state", c.State)
	}
	q.Set("limit", fmt.Sprint(c.Limit))
	var raw json.RawMessage
	if err := c.call("GET", "/v1/deliveries?"+q.Encode(), nil, &raw); err != nil {
		return err
	}
	if c.JSON {
		return printJSON(g.stdout, raw)
	}
	var out struct {
		Deliveries []api.DeliveryItem `json:"deliveries"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DELIVERY\tENVELOPE\tCHANNEL\tTO\tSTATE\tATTEMPTS\tUPDATED\tREASON")
	for _, d := range out.Deliveries {
		reason := d.DeadReason
		if reason == "" {
			reason = d.LastError
		}
		if len(reason) > 60 {
			reason = reason[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.EnvelopeID, d.Channel, d.To, d.State, d.Attempts, d.UpdatedAt.Format(time.RFC3339), reason)
	}
	return tw.Flush()
}

// DeliveriesShowCmd shows deliveries.
type DeliveriesShowCmd struct {
	apiFlags
	ID string `arg:"" help:"env_… or dlv_… id."`
}

// Run shows the deliveries as JSON.
func (c *DeliveriesShowCmd) Run(g *globals) error {
	var raw json.RawMessage
	if err := c.call("GET", "/v1/deliveries/"+url.PathEscape(c.ID), nil, &raw); err != nil {
		return err
	}
	return printJSON(g.stdout, raw)
}

// DeliveriesRetryCmd retries dead deliveries.
type DeliveriesRetryCmd struct {
	apiFlags
	ID string `arg:"" help:"env_… or dlv_… id."`
}

// Run retries.
func (c *DeliveriesRetryCmd) Run(g *globals) error {
	var raw json.RawMessage
	if err := c.call("POST", "/v1/deliveries/"+url.PathEscape(c.ID)+"/retry", nil, &raw); err != nil {
		return err
	}
	return printJSON(g.stdout, raw)
}
