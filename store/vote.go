package store

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Vote is one person's vote counted toward an approval's quorum: small,
// since it is kept in the approval's record.
type Vote struct {
	Person   string    `json:"person"`
	Channel  string    `json:"channel"`
	Decision string    `json:"decision"` // granted, denied
	At       time.Time `json:"at"`
}

// ErrSecondVote: the person has voted on this approval before. The vote is
// kept in the approval's trail (ignored, why "second-vote") and has no
// effect; Decide returns the approval as it is.
var ErrSecondVote = errors.New("this person has already voted")

// The disposition of a vote that was counted without deciding, and why a
// second vote of one person was ignored.
const (
	DispositionCounted = "counted"
	WhySecondVote      = "second-vote"
)

// Tally is where an approval's quorum stands: the grants counted so far,
// and how many are needed.
func (a *Approval) Tally() (grants, quorum int) {
	for _, v := range a.Votes {
		if v.Decision == ApprovalGranted {
			grants++
		}
	}
	return grants, a.Quorum
}

// Voted reports whether person has voted on a.
func (a *Approval) Voted(person string) bool {
	for _, v := range a.Votes {
		if v.Person == person {
			return true
		}
	}
	return false
}

// Outcomes of CountVote.
const (
	VoteCounted = iota + 1 // recorded; the quorum is not reached yet
	VoteDecides            // a denial, or the grant that completes the quorum: d now decides a
	VoteSecond             // the person voted before: no effect
)

// CountVote applies d, a vote of d.Person (granted or denied) on a, a
// pending approval with a quorum, and says what it does. A vote that
// decides completes d: DecidedBy names the policy and the deciders
// ("policy:large (alice@example.org, +447700900123)"): every person who
// granted, or the one who denied. Backends call it inside the transaction
// that holds the approval, so that concurrent votes are counted one at a
// time.
func CountVote(a *Approval, d *Decision) int {
	if a.Voted(d.Person) {
		return VoteSecond
	}
	a.Votes = append(a.Votes, Vote{Person: d.Person, Channel: d.Channel, Decision: d.State, At: d.At})
	switch {
	case d.State == ApprovalDenied:
		d.DecidedBy = "policy:" + a.Policy + " (" + d.Person + ")"
		return VoteDecides
	case d.State == ApprovalGranted:
		grants, quorum := a.Tally()
		if grants < quorum {
			return VoteCounted
		}
		var who []string
		for _, v := range a.Votes {
			if v.Decision == ApprovalGranted {
				who = append(who, v.Person)
			}
		}
		d.DecidedBy = "policy:" + a.Policy + " (" + strings.Join(who, ", ") + ")"
		return VoteDecides
	}
	return VoteCounted
}

// VoteCountedEvent is the trail's record of a vote counted toward a quorum
// without deciding: its disposition, and the tally after it ("1 of 2").
func VoteCountedEvent(v ApprovalEvent, a *Approval) ApprovalEvent {
	grants, quorum := a.Tally()
	v.Evidence = withEvidence(v.Evidence, "disposition", DispositionCounted)
	v.Evidence["tally"] = strconv.Itoa(grants) + " of " + strconv.Itoa(quorum)
	delete(v.Evidence, "why")
	return v
}

// VoteSecondEvent is the trail's record of a second vote of one person.
func VoteSecondEvent(v ApprovalEvent) ApprovalEvent {
	v.Evidence = withEvidence(v.Evidence, "disposition", DispositionIgnored)
	v.Evidence["why"] = WhySecondVote
	return v
}

// VoteEventOf is the voted event of decision d: its Vote, or one made of
// d when it has none.
func VoteEventOf(d Decision) ApprovalEvent {
	if d.Vote != nil {
		v := *d.Vote
		v.Evidence = withEvidence(v.Evidence, "decision", d.State)
		return v
	}
	return ApprovalEvent{At: d.At, Kind: EventVoted, Actor: d.Person, Channel: d.Channel,
		Evidence: map[string]string{"decision": d.State}}
}
