package main

import (
	"fmt"

	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/render"
)

// wireRender builds the renderer every channel and the approvals notices
// use, from the `render:` section and public_url.
func (a *app) wireRender() error {
	r, err := newRenderer(a.cfg)
	if err != nil {
		return err
	}
	a.renderer = r
	return nil
}

// newRenderer builds the renderer of a configuration: the daemon's, and
// `beachd render`'s, which must render exactly as the daemon would.
func newRenderer(cfg *config.Config) (*render.Renderer, error) {
	rc, err := cfg.Render.RendererConfig(cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	// Mail is sent but no intake reads the replies: never ask for one.
	rc.NoEmailReplies = cfg.Email != nil && cfg.Email.IMAP == nil
	r, err := render.New(rc)
	if err != nil {
		return nil, fmt.Errorf("renderer: %w", err)
	}
	return r, nil
}
