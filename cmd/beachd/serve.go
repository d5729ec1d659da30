package main

import (
	"fmt"
	"net"
)

// ServeCmd runs the daemon.
type ServeCmd struct{}

// Run loads the configuration, builds the daemon and runs it until a signal.
func (ServeCmd) Run(g *globals) error {
	cfg, err := loadConfig(g.configPath, g.getenv)
	if err != nil {
		return err
	}
	return serve(g, cfg, false, nil)
}

func serve(g *globals, cfg *Config, dev bool, ln net.Listener) error {
	reg, err := cfg.validate()
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, g.stderr)
	a, err := buildApp(g.ctx, cfg, reg, log, g.stdout, dev, ln)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if dev {
		a.onListen = append(a.onListen, func(addr string) { printDevBanner(g.stdout, a, addr) })
	}
	return a.run(g.ctx)
}
