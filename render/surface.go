package render

import (
	"encoding/json"

	"github.com/cool-ai/beachd/render/a2ui"
)

// renderSurface renders one a2ui-surface part's data. It never fails; what it
// cannot render comes back as warnings.
func (r *Renderer) renderSurface(data json.RawMessage, in *Input) surfaceResult {
	res := a2ui.Render(data, a2ui.Options{
		MaxOutputBytes: r.cfg.MaxSurfaceBytes,
		Now:            in.Now,
		Locale:         r.cfg.Locale,
		TimeZone:       r.cfg.TimeZone,
	})
	return surfaceResult{Text: res.Text, HTML: res.HTML, Title: res.Title, Texts: res.Texts, Warnings: res.Warnings}
}
