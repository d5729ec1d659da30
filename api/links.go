package api

import "net/http"

// LinkRoutes mount the approval confirmation page (approvals.Service's
// LinkHandler) at /a/{token}: GET (and HEAD, which ServeMux routes to GET)
// show it and never change state; POST decides. The token is the proof, so
// no API key is required.
func LinkRoutes(page http.Handler) []Route {
	return []Route{
		{Method: "GET", Pattern: "/a/{token}", Handler: page, Auth: false},
		{Method: "POST", Pattern: "/a/{token}", Handler: page, Auth: false},
	}
}
