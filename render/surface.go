package render

import (
	"encoding/json"
	"errors"

	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render/a2ui"
)

// surfaceBudget is what is left, for one rendition, of the A2UI evaluation
// budget and of the room for rendered surfaces: the surfaces of one
// envelope share them, so that many surface parts cannot multiply either.
type surfaceBudget struct {
	bytes, steps int64
	// room is the output (text or HTML, the longer) the remaining
	// surfaces may fill: half of what the message may carry.
	room, roomAtStart int
}

func (r *Renderer) newSurfaceBudget(page bool) surfaceBudget {
	room := r.contentBound(page) / 2
	return surfaceBudget{bytes: a2ui.DefaultMaxEvalBytes, steps: a2ui.DefaultMaxEvalSteps, room: room, roomAtStart: room}
}

// minSurfaceRoom is the least output a surface is rendered into; with
// less room left it is not shown.
const minSurfaceRoom = 1 << 10

// renderSurface renders one a2ui-surface part's data, charging b. What it
// cannot render comes back as warnings; a surface over the evaluation
// budget is an error matching a2ui.ErrOverBudget.
func (r *Renderer) renderSurface(data json.RawMessage, in *Input, b *surfaceBudget) (surfaceResult, error) {
	res := a2ui.Render(data, a2ui.Options{
		MaxOutputBytes: min(r.cfg.MaxSurfaceBytes, b.room),
		Now:            in.Now,
		Locale:         r.cfg.Locale,
		TimeZone:       r.cfg.TimeZone,
		MaxEvalBytes:   max(b.bytes, 1), // a2ui reads zero as its default
		MaxEvalSteps:   max(b.steps, 1),
	})
	b.bytes -= res.SpentBytes
	b.steps -= res.SpentSteps
	if res.Err != nil {
		return surfaceResult{}, wholeBudget(res.Err)
	}
	b.room -= max(len(res.Text), len(res.HTML))
	return surfaceResult{Text: res.Text, HTML: res.HTML, Title: res.Title, Texts: res.Texts, Warnings: res.Warnings}, nil
}

// CheckSurfaces evaluates the a2ui-surface parts of env as a rendition
// does, sharing one evaluation budget, without laying them out. It returns
// the index of the first part over the budget and its error (matching
// a2ui.ErrOverBudget), or -1 and nil. It is what ingest refuses an
// envelope by, so that a surface no rendition could render is not stored.
func CheckSurfaces(env *envelope.Envelope) (part int, err error) {
	bytes, steps := int64(a2ui.DefaultMaxEvalBytes), int64(a2ui.DefaultMaxEvalSteps)
	for i, p := range env.Parts {
		if p.PartType() != envelope.PartA2UISurface || len(p.Data) == 0 {
			continue
		}
		res := a2ui.Check(p.Data, a2ui.Options{MaxEvalBytes: max(bytes, 1), MaxEvalSteps: max(steps, 1)})
		bytes -= res.SpentBytes
		steps -= res.SpentSteps
		if res.Err != nil {
			return i, wholeBudget(res.Err)
		}
	}
	return -1, nil
}

// wholeBudget names, in a LimitError, the bound of the whole message
// rather than what the surfaces before this one left of it.
func wholeBudget(err error) error {
	var le *a2ui.LimitError
	if !errors.As(err, &le) {
		return err
	}
	e := *le
	e.Limit = a2ui.DefaultMaxEvalSteps
	if e.Bound == a2ui.BoundBytes {
		e.Limit = a2ui.DefaultMaxEvalBytes
	}
	return &e
}
