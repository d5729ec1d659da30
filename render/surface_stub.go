//go:build !a2uireal

package render

import (
	"encoding/json"
	"html"
)

// Temporary stand-in while render/a2ui is being written; build with -tags
// a2uireal for the real renderer. Removed once a2ui.Render exists.
func (r *Renderer) renderSurface(data json.RawMessage, in *Input) surfaceResult {
	return surfaceResult{Text: "[surface]", HTML: "<p>" + html.EscapeString("[surface]") + "</p>", Texts: []string{"[surface]"}}
}
