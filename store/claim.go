package store

import (
	"errors"
	"slices"
	"time"
)

// The claim rules, the same on every backend: a backend offers each
// channel's due jobs as a lane, SelectClaims chooses, and the backend then
// leases what was chosen in the same transaction.

// maxRefusedRun bounds the run of due jobs of refused recipients that one
// claim walks past in one channel: scanning on would cost every claim as
// much again. Other recipients behind it wait for the run to drain below
// this length; other channels do not wait.
const maxRefusedRun = 1024

// ClaimCandidate is one due job a backend offers a claim.
type ClaimCandidate struct {
	// Recipient is the job's channel and recipient (RecipientKey): a
	// refused recipient's further jobs are passed over without Load.
	Recipient string
	// Due is when the job became due; lanes are merged in due order.
	Due time.Time
	// Load reads the job's record. ErrNotFound makes the candidate an
	// orphan (an index entry without its record, which the backend
	// removes); any other error passes it over (CheckInvariants names it).
	Load func() (*Delivery, error)
	// Ref is the backend's own reference to the candidate (bbolt: its due
	// key), handed back in the choice.
	Ref []byte
	// A lane may reuse its memory: Load and Ref are valid until the lane
	// is called again, so that passing over a refused recipient's long run
	// of jobs allocates nothing. SelectClaims copies the Ref it keeps.
}

// ClaimLane yields one channel's jobs due by now, in due order; ok is false
// at the end.
type ClaimLane func() (c ClaimCandidate, ok bool)

// ClaimChoice is what SelectClaims chose.
type ClaimChoice struct {
	// Taken are the admitted jobs in the order taken, their state already
	// set to sending; Refs are their candidates' Ref, index for index.
	Taken []*Delivery
	Refs  [][]byte
	// Orphans are the candidates whose Load said ErrNotFound.
	Orphans []ClaimCandidate
}

// RecipientKey is a job's channel and recipient as one string, the unit of
// RefuseRecipient.
func RecipientKey(channel, to string) string { return channel + "\x00" + to }

// SelectClaims applies the claim rules to the lanes: the earliest due job
// across lanes first; at most max jobs; admit (nil admits all) is asked
// about each job with only its ID, Channel and To; a recipient it refuses
// stays refused for the rest of the claim (its further jobs passed over
// without being read); a channel it refuses is closed for this claim; a lane
// is abandoned after 64×max+4096 candidates or a run of maxRefusedRun
// refused recipients' jobs. Every taken job gets state sending and lease
// until.
func SelectClaims(lanes []ClaimLane, max int, until time.Time, admit func(*Delivery) Admission) ClaimChoice {
	type lane struct {
		next    ClaimLane
		cur     ClaimCandidate
		skipped int // consecutive candidates of refused recipients
		scanned int
	}
	var open []*lane
	for _, next := range lanes {
		if c, ok := next(); ok {
			open = append(open, &lane{next: next, cur: c})
		}
	}
	var out ClaimChoice
	refused := map[string]bool{}
	for len(open) > 0 && len(out.Taken) < max {
		li := 0
		for i, l := range open {
			if l.cur.Due.Before(open[li].cur.Due) {
				li = i
			}
		}
		l := open[li]
		drop := func() { open = slices.Delete(open, li, li+1) }
		advance := func() {
			if c, ok := l.next(); ok {
				l.cur = c
			} else {
				drop()
			}
		}
		if l.scanned++; l.scanned > 64*max+4096 {
			drop()
			continue
		}
		c := l.cur
		if admit != nil && refused[c.Recipient] {
			if l.skipped++; l.skipped > maxRefusedRun {
				drop()
				continue
			}
			advance()
			continue
		}
		l.skipped = 0
		d, err := c.Load()
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				c.Ref = slices.Clone(c.Ref)
				out.Orphans = append(out.Orphans, c)
			}
			advance()
			continue
		}
		if admit != nil {
			probe := Delivery{ID: d.ID, Channel: d.Channel, To: d.To}
			switch admit(&probe) {
			case RefuseChannel:
				drop()
				continue
			case RefuseRecipient:
				refused[c.Recipient] = true
				advance()
				continue
			}
		}
		d.State, d.LeaseUntil = StateSending, until
		out.Taken = append(out.Taken, d)
		out.Refs = append(out.Refs, slices.Clone(c.Ref))
		advance()
	}
	return out
}
