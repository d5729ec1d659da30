package a2ui
import ("testing";"os";"strings")
func TestDemoAll(t *testing.T) {
	var parts []string
	for _, tc := range componentCases { r := renderTest(t, tc.components, tc.data); parts = append(parts, "<h6>"+tc.name+"</h6>"+r.HTML); os.WriteFile("/tmp/a2uidbg/demo_"+tc.name+".txt", []byte(r.Text), 0o644) }
	os.WriteFile("/tmp/a2uidbg/demo.html", []byte(`<html><head><meta charset="utf-8"></head><body style="width:640px">`+strings.Join(parts, "\n")+`</body></html>`), 0o644)
}
