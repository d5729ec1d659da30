package webhook

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCollector(t *testing.T) {
	clk := newClock()
	srv := httptest.NewServer(status(500, ""))
	defer srv.Close()
	d := newDeliverer(t, clk, srv.URL, func(c *Config, _ *Endpoint) { c.Breaker.Threshold = 1 })
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(d.Collector()); err != nil {
		t.Fatal(err)
	}
	gauge := func(name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				m := mf.GetMetric()[0]
				if l := m.GetLabel(); len(l) != 1 || l[0].GetValue() != "ops" {
					t.Fatalf("%s labels %v", name, l)
				}
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("%s not gathered", name)
		return 0
	}
	if v := gauge("beachd_webhook_circuit_state"); v != 0 {
		t.Fatalf("circuit %v before failures", v)
	}
	_, _ = d.Deliver(context.Background(), job(t, "ops", "dlv_m"))
	if v := gauge("beachd_webhook_circuit_state"); v != 1 {
		t.Fatalf("circuit %v after the threshold, want 1 (open)", v)
	}
	if v := gauge("beachd_webhook_endpoint_disabled"); v != 0 {
		t.Fatalf("disabled %v", v)
	}
}
