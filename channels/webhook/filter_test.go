package webhook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cool-ai/beachd/channels"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/render"
	"github.com/cool-ai/beachd/store"
)

// TestRenderFilterMatchesRegistry: with no approval handles the renderer's
// webhook rendition is exactly the registry filter, for every sample
// envelope and several consumes lists.
func TestRenderFilterMatchesRegistry(t *testing.T) {
	r, err := render.New(render.Config{PublicURL: "https://beachd.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	reg := envelope.NewRegistry()
	files, _ := filepath.Glob("../../testdata/envelopes/*.json")
	files = append(files, "testdata/mixed.json")
	if len(files) < 2 {
		t.Fatalf("no sample envelopes found")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		env, err := envelope.Decode(b, envelope.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, consumes := range [][]string{nil, {"llm-context"}, {"llm-context", "a2ui-surface", "reasoning-trace"}} {
			j := &channels.Job{Delivery: &store.Delivery{ID: "dlv_1", Channel: "webhook", To: "ops"}, Envelope: env}
			ep := &Endpoint{Name: "ops", Consumes: consumes}
			a, err := RenderFilter(r, reg)(j, ep)
			if err != nil {
				t.Fatalf("%s %v: render: %v", f, consumes, err)
			}
			b, _ := RegistryFilter(reg)(j, ep)
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if string(ja) != string(jb) {
				t.Errorf("%s consumes %v:\nrenderer %s\nregistry %s", f, consumes, ja, jb)
			}
		}
	}
}

func TestRenderFilterAddsDecisionURL(t *testing.T) {
	r, err := render.New(render.Config{PublicURL: "https://beachd.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	env := loadEnvelope(t, "mixed.json")
	j := &channels.Job{Delivery: &store.Delivery{ID: "dlv_1", Channel: "webhook", To: "ops"}, Envelope: env,
		Approvals: []render.ApprovalHandle{{ApprovalID: "appr_7Q2K9", LinkURL: "https://beachd.example.org/a/link123"}}}
	got, err := RenderFilter(r, envelope.NewRegistry())(j, &Endpoint{Name: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if pts := partTypes(got); !slices.Equal(pts, []string{"response", "domain-data", "approval-request"}) {
		t.Fatalf("parts %v", pts)
	}
	if u := got.Parts[2].Metadata["decisionUrl"]; u != "https://beachd.example.org/a/link123" {
		t.Errorf("decisionUrl = %v", u)
	}
	// The job's envelope is not modified.
	for _, p := range env.Parts {
		if _, ok := p.Metadata["decisionUrl"]; ok {
			t.Fatal("renderer changed the shared envelope")
		}
	}
}
