package store

import "time"

// DecideLease is the lease rule every backend applies, under its own lock:
// cur is the stored lease (zero when none), and the result is the lease to
// store and whether holder has it. A first take gets generation 1; the
// holder renewing at its generation before the end keeps it; another
// holder waits for the end; a take after the end is a new generation.
func DecideLease(cur Lease, name, holder string, gen uint64, ttl time.Duration, now time.Time) (Lease, bool) {
	until := now.Add(ttl)
	switch {
	case cur.Name == "":
		return Lease{Name: name, Holder: holder, Generation: 1, Until: until}, true
	case cur.Holder == holder && gen != 0 && cur.Generation == gen && now.Before(cur.Until):
		cur.Until = until
		return cur, true
	case now.Before(cur.Until):
		return cur, false
	default:
		return Lease{Name: name, Holder: holder, Generation: cur.Generation + 1, Until: until}, true
	}
}

// LivenessLease is the name of the lease a replica on a shared store holds
// for as long as it runs, under its holder id: the jobs it leased are
// re-queued as soon as this lease runs out, without waiting for their own.
func LivenessLease(holder string) string { return "replica/" + holder }
