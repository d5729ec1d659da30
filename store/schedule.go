package store

// Schedule buckets. The schedule package owns their meaning.
var (
	bSchedules    = []byte("schedules")     // schedule name → last state
	bScheduleRuns = []byte("schedule_runs") // schedule name + 0 + be64(slot) → run
)
