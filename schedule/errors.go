package schedule

import (
	"errors"
	"fmt"

	"github.com/cool-ai/beachd/store"
)

// Sentinel errors of the schedule package. Match them with errors.Is.
var (
	// ErrUnknownSchedule: no schedule of that name is configured. It also
	// matches store.ErrNotFound, so the API answers 404.
	ErrUnknownSchedule = fmt.Errorf("unknown schedule: %w", store.ErrNotFound)
	// ErrBusy: the schedule has a run in progress; a schedule never overlaps
	// itself. It also matches store.ErrBadState (409).
	ErrBusy = fmt.Errorf("the schedule has a run in progress: %w", store.ErrBadState)
	// ErrNotRunning: RunNow was called while the scheduler's Run is not active.
	ErrNotRunning = errors.New("the scheduler is not running")
	// ErrTimeout: the agent's turn did not settle within the schedule's timeout.
	ErrTimeout = errors.New("the agent's turn did not settle in time")
	// ErrNoResult: the agent answered with nothing to deliver.
	ErrNoResult = errors.New("the agent answered with nothing to deliver")
	// ErrAgentFailed: the agent's turn ended in an error state.
	ErrAgentFailed = errors.New("the agent's turn failed")
)

// ConfigError lists every problem of a set of schedule definitions.
type ConfigError struct{ Problems []Problem }

// Problem is one configuration problem: Key locates it ("schedules[2].cron"),
// Reason names the schedule and says what is wrong.
type Problem struct {
	Key    string
	Reason string
}

func (e *ConfigError) Error() string {
	s := "invalid schedules:"
	for _, p := range e.Problems {
		s += "\n  " + p.Key + ": " + p.Reason
	}
	return s
}
