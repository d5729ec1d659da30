package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cool-ai/beachd/api"
	"github.com/cool-ai/beachd/schedule"
)

// wireSchedules builds the scheduler over the agent client and the ingester,
// mounts GET /v1/schedules and POST /v1/schedules/{name}/run, and adds the
// scheduler's Run as a worker. It runs after the ingester exists.
func (a *app) wireSchedules() error {
	if a.enqueuer == nil {
		return errors.New("the ingester must be built before schedules")
	}
	if a.agents == nil {
		return errors.New("the agent client must be built before schedules")
	}
	defs := make([]schedule.Definition, len(a.cfg.Schedules))
	for i := range a.cfg.Schedules {
		defs[i] = a.cfg.Schedules[i].Definition()
	}
	agents := map[string]bool{}
	for name, ac := range a.cfg.Agents {
		if ac.A2AURL != "" {
			agents[name] = true
		}
	}
	log := a.log.With("component", "schedule")
	// A schedule without a zone runs in the machine's, named as Go's
	// time.Local finds it (TZ, /etc/localtime), so that listings show
	// "Europe/London", not "Local".
	zone := machineZone(os.LookupEnv, localtimePath)
	s, err := schedule.New(schedule.Config{Schedules: defs, Agents: agents, Now: a.now, Log: log, Metrics: a.metrics, DefaultZone: zone},
		a.db, a.agents, a.enqueuer)
	if err != nil {
		return err
	}
	a.console.scheduler = s
	a.routes = append(a.routes, api.ScheduleRoutes(s, log)...)
	// The scheduler is a singleton: one replica fires the schedules (the
	// store refuses a second claim of a slot all the same).
	a.workers = append(a.workers, worker{name: "schedules", run: a.singleton(singletonScheduler, s.Run),
		started: a.singletonStarted(singletonScheduler, s.Active)})
	if a.dev && len(defs) > 0 {
		names := make([]string, len(defs))
		for i, d := range defs {
			names[i] = fmt.Sprintf("%s (%s)", d.Name, d.Cron)
		}
		a.banner = append(a.banner, fmt.Sprintf("schedules    %s   (beachd schedules list; fire one now: beachd schedules run %s)",
			strings.Join(names, ", "), defs[0].Name))
	}
	return nil
}
