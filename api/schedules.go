package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/cool-ai/beachd/schedule"
	"github.com/cool-ai/beachd/store"
)

// ScheduleService is what the schedule endpoints need of the scheduler
// (schedule.Scheduler implements it).
type ScheduleService interface {
	List(ctx context.Context) ([]schedule.Status, error)
	RunNow(ctx context.Context, name string) (store.ScheduleRun, error)
	Pause(ctx context.Context, name, by string) (schedule.Status, error)
	Resume(ctx context.Context, name, by string) (schedule.Status, error)
}

var _ ScheduleService = (*schedule.Scheduler)(nil)

// ScheduleRoutes are the operator endpoints of schedules, both needing the
// API key: GET /v1/schedules → 200 {"schedules":[…]} (next slot, recent
// runs, last outcome of each), and POST /v1/schedules/{name}/run → 202
// {"run":{…}} (the run is claimed and started; its outcome shows in the
// list), 404 for an unknown schedule, 409 while the schedule has a run in
// progress, 503 while the scheduler is not running. POST
// /v1/schedules/{name}/pause and /resume → 200 {"schedule":{…}} (the
// schedule's status, with paused, pausedAt and pausedBy — "api key " and the
// key's id), 404 for an unknown schedule; both are idempotent, and neither
// needs the scheduler to be running.
func ScheduleRoutes(svc ScheduleService, log *slog.Logger) []Route {
	h := scheduleHandlers{svc: svc, log: log}
	return []Route{
		{Method: "GET", Pattern: "/v1/schedules", Handler: http.HandlerFunc(h.list), Auth: true},
		{Method: "POST", Pattern: "/v1/schedules/{name}/run", Handler: http.HandlerFunc(h.run), Auth: true},
		{Method: "POST", Pattern: "/v1/schedules/{name}/pause", Handler: h.setPaused(true), Auth: true},
		{Method: "POST", Pattern: "/v1/schedules/{name}/resume", Handler: h.setPaused(false), Auth: true},
	}
}

type scheduleHandlers struct {
	svc ScheduleService
	log *slog.Logger
}

func (h scheduleHandlers) list(w http.ResponseWriter, r *http.Request) {
	st, err := h.svc.List(r.Context())
	if err != nil {
		WriteError(w, h.log, err)
		return
	}
	if st == nil {
		st = []schedule.Status{}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"schedules": scheduleViews(st)})
}

func (h scheduleHandlers) run(w http.ResponseWriter, r *http.Request) {
	run, err := h.svc.RunNow(r.Context(), r.PathValue("name"))
	switch {
	case errors.Is(err, schedule.ErrNotRunning):
		WriteJSON(w, http.StatusServiceUnavailable, errorBody{Error: "the scheduler is not running"})
		return
	case errors.Is(err, schedule.ErrUnknownSchedule):
		WriteJSON(w, http.StatusNotFound, errorBody{Error: "unknown schedule"})
		return
	case errors.Is(err, schedule.ErrBusy):
		WriteJSON(w, http.StatusConflict, errorBody{Error: "the schedule has a run in progress; a schedule never overlaps itself"})
		return
	case err != nil:
		WriteError(w, h.log, err)
		return
	}
	WriteJSON(w, http.StatusAccepted, map[string]any{"run": runView(run.ID(), run)})
}

func (h scheduleHandlers) setPaused(pause bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := h.svc.Resume
		if pause {
			f = h.svc.Pause
		}
		st, err := f(r.Context(), r.PathValue("name"), "api key "+KeyID(r))
		switch {
		case errors.Is(err, schedule.ErrUnknownSchedule):
			WriteJSON(w, http.StatusNotFound, errorBody{Error: "unknown schedule"})
			return
		case err != nil:
			WriteError(w, h.log, err)
			return
		}
		WriteJSON(w, http.StatusOK, map[string]any{"schedule": scheduleView(st)})
	})
}
