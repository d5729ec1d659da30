package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/agent/a2ajstest"
	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/internal/testkit/poll"
)

// TestA2APushLatency measures, for conversation turns answered by the JS
// SDK agent, the time from the agent publishing a task's final status to
// beachd sending the person's SMS (the dev channel's record of it), with
// pushes on and off in the agent's card; conversations poll every 500ms
// (every 5s when pushes are expected). Outside CI:
//
//	BEACHD_PUSH_BENCH=200 go test -run TestA2APushLatency -v ./cmd/beachd
func TestA2APushLatency(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BEACHD_PUSH_BENCH"))
	if n <= 0 {
		t.Skip("set BEACHD_PUSH_BENCH to the number of turns per mode")
	}
	for _, push := range []bool{true, false} {
		name := map[bool]string{true: "push", false: "poll"}[push]
		t.Run(name, func(t *testing.T) {
			// The agent ends each task at a random moment, as real ones do,
			// not in step with beachd's polls.
			js := a2ajstest.Start(t, a2ajstest.Options{Push: push, SlowJitter: time.Second})
			d := startDev(t, func(c *config.Config) {
				ag := c.Agents[devAgentName]
				ag.A2AURL = js.JSONRPC
				in := *ag.Inbound
				in.MaxTurnsPerSender = config.MaxTurnsConfig{PerMinute: 1000, PerHour: 10000}
				in.MaxTurnsPerAgent = config.MaxTurnsConfig{PerMinute: 1000, PerHour: 10000}
				ag.Inbound = &in
				c.Agents[devAgentName] = ag
			})
			const people = 20
			var wg sync.WaitGroup
			for p := range people {
				wg.Go(func() {
					person := fmt.Sprintf("+4477009%05d", p)
					for i := p; i < n; i += people {
						brief := fmt.Sprintf("bench %d", i)
						d.devSay(`{"channel":"sms","from":"` + person + `","text":"slow:` + brief + `"}`)
						poll.Eventually(t, time.Minute, "answer "+brief, func() bool {
							return d.smsAt("Today's brief: "+brief+"\n") != nil ||
								d.smsAt("Today's brief: "+brief) != nil
						})
					}
				})
			}
			wg.Wait()
			rec, err := js.Received(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			sent := d.smsTimes()
			var lat []time.Duration
			for _, f := range rec.Finals {
				at, ok := sent["Today's brief: "+f.Brief]
				if !ok {
					t.Fatalf("no SMS for %q", f.Brief)
				}
				lat = append(lat, at.Sub(time.UnixMilli(f.At)))
			}
			slices.Sort(lat)
			q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
			// How each turn's answer arrived: with pushes on, a turn
			// answered by poll is one whose pushes did not settle it.
			var turns struct{ Turns []struct{ AnsweredBy string } }
			d.do("GET", fmt.Sprintf("/v1/turns?state=answered&limit=%d", n), nil, "", &turns)
			by := map[string]int{}
			for _, x := range turns.Turns {
				by[x.AnsweredBy]++
			}
			t.Logf("%s: %d turns (answered by %v), agent's final update → SMS sent: p50 %s, p99 %s, max %s", name, len(lat), by,
				q(0.50).Round(time.Millisecond), q(0.99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
		})
	}
}

// smsTimes maps each recorded SMS's first line to when it was sent.
func (d *devDaemon) smsTimes() map[string]time.Time {
	var m struct {
		Messages []struct {
			Body string
			At   time.Time
		}
	}
	d.do("GET", "/dev/messages", nil, "", &m)
	out := map[string]time.Time{}
	for _, x := range m.Messages {
		for _, line := range strings.Split(x.Body, "\n") {
			if strings.HasPrefix(line, "Today's brief: ") {
				out[strings.TrimSpace(line)] = x.At
			}
		}
	}
	return out
}

func (d *devDaemon) smsAt(marker string) *time.Time {
	for k, at := range d.smsTimes() {
		if k == strings.TrimSpace(marker) {
			return &at
		}
	}
	return nil
}
