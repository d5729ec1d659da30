package a2ui
import ("testing";"os";"path/filepath";"strings")
func TestDumpTexts(t *testing.T) {
	files, _ := filepath.Glob("testdata/examples/*.json")
	for _, f := range files { d,_ := os.ReadFile(f); r := Render(d, goldenOptions()); b := filepath.Base(f); os.WriteFile("/tmp/a2uidbg/"+b+".texts", []byte(strings.Join(r.Texts, "\n")), 0o644) }
}
