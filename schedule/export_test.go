package schedule

// The test helpers, for the tests of package schedule_test (which cannot
// live here: they drive the scheduler through package api, which imports
// this one).
var (
	NewScheduler = newScheduler
	Running      = running
)
