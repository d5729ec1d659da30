package approvals

import (
	"context"
	"encoding/json"
)

type contextT = context.Context

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
