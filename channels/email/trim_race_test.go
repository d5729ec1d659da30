//go:build race

package email

// Under the race detector every memory access is checked, which makes the
// linear-time test's inputs slow to trim without telling anything new
// about how trimming grows: it runs on a quarter of the sizes there.
const trimTimeScale = 4
