package webhook

import (
	"net/http"
	"sort"
)

// StatusHandler serves GET /v1/webhooks/endpoints: every endpoint's
// breaker, disabled flag and attempts in flight (no URLs, no secrets).
func (d *Deliverer) StatusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		names := make([]string, 0, len(d.endpoints))
		for n := range d.endpoints {
			names = append(names, n)
		}
		sort.Strings(names)
		out := make([]EndpointStatus, 0, len(names))
		for _, n := range names {
			st, _ := d.Status(n)
			out = append(out, st)
		}
		writeJSON(w, http.StatusOK, map[string]any{"endpoints": out})
	})
}

// EnableHandler serves POST /v1/webhooks/endpoints/{endpoint}/enable: the
// operator's way back after a 410 disabled an endpoint. Dead deliveries are
// then retried with POST /v1/deliveries/{id}/retry.
func (d *Deliverer) EnableHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("endpoint")
		if !d.Enable(name) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown webhook endpoint"})
			return
		}
		st, _ := d.Status(name)
		writeJSON(w, http.StatusOK, st)
	})
}
