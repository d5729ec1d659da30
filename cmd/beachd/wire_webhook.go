package main

import (
	"fmt"
	"sort"
	"time"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/channels/webhook"
	"github.com/cool-ai/beachd/envelope"
)

// wireWebhook builds the webhook Deliverer from `webhooks.endpoints` and
// mounts the signed inbound decision route (POST
// /v1/inbound/webhook/{endpoint}) and the operator's endpoint routes (GET
// /v1/webhooks/endpoints, POST /v1/webhooks/endpoints/{endpoint}/enable).
// Without endpoints the channel is off.
func (a *app) wireWebhook() error {
	if len(a.cfg.Webhooks.Endpoints) == 0 {
		return nil
	}
	names := make([]string, 0, len(a.cfg.Webhooks.Endpoints))
	for name := range a.cfg.Webhooks.Endpoints {
		names = append(names, name)
	}
	sort.Strings(names)
	eps := make([]webhook.Endpoint, 0, len(names))
	policy := channels.WebhookPolicy
	for _, name := range names {
		ec := a.cfg.Webhooks.Endpoints[name]
		signer, err := webhook.ParseSigner(ec.SecretList()...)
		if err != nil {
			return fmt.Errorf("webhooks.endpoints.%s: %w", name, err)
		}
		timeout := durationOr(ec.Timeout, webhook.DefaultTimeout)
		// The dispatcher bounds an attempt by the channel policy's timeout;
		// let the slowest endpoint's own timeout fit in it.
		if timeout+5*time.Second > policy.Timeout {
			policy.Timeout = timeout + 5*time.Second
		}
		eps = append(eps, webhook.Endpoint{Name: name, URL: ec.URL, Signer: signer, Consumes: ec.Consumes,
			Timeout: timeout, MaxConcurrency: ec.MaxConcurrency, Headers: ec.Headers})
	}
	cfg := webhook.Config{
		Endpoints: eps,
		Registry:  a.registry,
		Version:   version,
		Now:       a.now,
		Log:       a.log.With("channel", "webhook"),
	}
	if a.renderer != nil {
		cfg.Filter = webhook.RenderFilter(a.renderer, a.registry)
	}
	d, err := webhook.New(cfg)
	if err != nil {
		return err
	}
	a.deliverers[envelope.ChannelWebhook] = d
	if a.metrics != nil {
		if err := a.metrics.Register(d.Collector()); err != nil {
			return fmt.Errorf("webhook metrics: %w", err)
		}
	}
	a.policies[envelope.ChannelWebhook] = policy
	a.routes = append(a.routes,
		api.Route{Method: "GET", Pattern: "/v1/webhooks/endpoints", Handler: d.StatusHandler(), Auth: true},
		api.Route{Method: "POST", Pattern: "/v1/webhooks/endpoints/{endpoint}/enable", Handler: d.EnableHandler(), Auth: true})
	if a.inbound != nil {
		a.routes = append(a.routes, api.Route{Method: "POST", Pattern: "/v1/inbound/webhook/{endpoint}",
			Handler: webhook.NewInboundHandler(d, a.inbound, a.now, a.log.With("channel", "webhook")), Auth: false})
	}
	return nil
}
