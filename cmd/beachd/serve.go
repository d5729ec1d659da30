package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/cool-ai/beachd/config"
)

// ServeCmd runs the daemon.
type ServeCmd struct{}

// Run loads and checks the configuration, builds the daemon and runs it
// until a signal. The file is checked as `beachd config check` checks it,
// every problem reported at once, before anything is created or opened.
func (ServeCmd) Run(g *globals) error {
	cfg, _, err := config.Check(g.configPath, g.getenv, false)
	if err != nil {
		return err
	}
	return serve(g, cfg, false, nil)
}

// serve checks cfg, builds the daemon and runs it. Nothing is created or
// opened in the data dir before the whole configuration has been checked.
func serve(g *globals, cfg *config.Config, dev bool, ln net.Listener) error {
	reg, err := cfg.ValidateServe(dev)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, g.stderr)
	for _, w := range cfg.Warnings {
		log.Warn("configuration", "warning", w)
	}
	if addr := g.getenv("BEACHD_PPROF"); addr != "" {
		// Profiling on a separate listener, off unless asked for, and only
		// on loopback (profiles show memory): BEACHD_PPROF=127.0.0.1:6060.
		host, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			return fmt.Errorf("BEACHD_PPROF=%q: must be a loopback host:port such as 127.0.0.1:6060", addr)
		}
		// Lock contention and blocking are sampled too while profiling is
		// on (the mutex and block profiles find what serialises the
		// dispatcher): one contended lock in 100, blocking events
		// weighted by a 10 µs rate.
		runtime.SetMutexProfileFraction(100)
		runtime.SetBlockProfileRate(10_000)
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil {
				log.Warn("pprof listener", "err", err)
			}
		}()
		defer srv.Close()
	}
	a, err := buildApp(g.ctx, cfg, reg, log, g.stdout, dev, ln)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if dev {
		a.onListen = append(a.onListen, func(addr string) { printDevBanner(g.stdout, a, addr) })
	}
	return a.run(g.ctx)
}
