//go:build !race

package email

// trimTimeScale divides the linear-time test's input sizes (see
// trim_race_test.go).
const trimTimeScale = 1
