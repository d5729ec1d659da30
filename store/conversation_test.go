package store

import "testing"

import "fmt"

func TestAppendChainKeepsFirstAndLatest(t *testing.T) {
	var chain []string
	for i := range 120 {
		chain = AppendChain(chain, fmt.Sprint(i))
	}
	chain = AppendChain(chain, "119", "")
	if len(chain) != MaxMessageIDChain || chain[0] != "0" || chain[1] != "71" || chain[len(chain)-1] != "119" {
		t.Fatalf("chain %v", chain)
	}
}
