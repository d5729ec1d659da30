package main

import (
	"fmt"

	"github.com/cool-ai/beachd/render"
)

// wireRender builds the renderer every channel and the approvals notices
// use, from the `render:` section and public_url.
func (a *app) wireRender() error {
	rc, err := a.cfg.Render.rendererConfig(a.cfg.PublicURL)
	if err != nil {
		return err
	}
	r, err := render.New(rc)
	if err != nil {
		return fmt.Errorf("renderer: %w", err)
	}
	a.renderer = r
	return nil
}
