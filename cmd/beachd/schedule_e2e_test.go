package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cool-ai/beachd/config"
	"github.com/cool-ai/beachd/envelope"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// TestScheduleEndToEnd fires a schedule against the dev a2a-go agent
// through the API; the turn's result arrives at the webhook sink and, by
// real SMTP, in the dev mailbox. The schedule then lists the run.
func TestScheduleEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon with its mail server")
	}
	t.Run("bolt", func(t *testing.T) { scheduleEndToEnd(t, "") })
	t.Run("postgres", func(t *testing.T) { scheduleEndToEnd(t, pgtest.DSN(t)) })
}

// scheduleEndToEnd runs the schedule test with the records in PostgreSQL
// at dsn, or in the embedded file when dsn is "".
func scheduleEndToEnd(t *testing.T, dsn string) {
	d := startDev(t, func(c *config.Config) {
		if dsn != "" {
			c.Store = config.StoreConfig{Driver: "postgres", DSN: dsn}
		}
		c.Schedules = []config.ScheduleConfig{{Name: "morning-brief", Cron: "CRON_TZ=Europe/London 0 8 * * 1-5", Agent: devAgentName,
			Message: "Today's tasks", To: []envelope.Recipient{
				{Channel: envelope.ChannelWebhook, Endpoint: devSinkEndpoint},
				{Channel: envelope.ChannelEmail, Address: "you@beachd.localhost"}}}}
	})
	d.runNow("morning-brief")
	d.waitSink("the scheduled turn's result at the sink", "The dev agent received: Today's tasks")
	poll.Eventually(t, 30*time.Second, "the scheduled turn's result in the mailbox", func() bool {
		for _, m := range d.inbox("") {
			var b bytes.Buffer
			b.ReadFrom(m.Body)
			if bytes.Contains(b.Bytes(), []byte("The dev agent received")) {
				return true
			}
		}
		return false
	})
	// The run is recorded succeeded just after its result is enqueued, so
	// the deliveries above may finish first: the list is polled.
	poll.Eventually(t, 30*time.Second, "a succeeded run of morning-brief in the schedules list", func() bool {
		var list struct {
			Schedules []struct {
				Name string
				Last struct{ State string }
			}
		}
		d.do("GET", "/v1/schedules", nil, "", &list)
		return len(list.Schedules) == 1 && list.Schedules[0].Name == "morning-brief" && list.Schedules[0].Last.State == "succeeded"
	})
}

// `beachd dev` comes with a sample schedule: listed (daily, enabled, with
// its next slot), fired by hand, answered by the dev agent — by a push
// notification —, its result at the webhook sink. It is in the banner too.
func TestDevSampleSchedule(t *testing.T) {
	d := startDev(t)
	if banner := strings.Join(d.a.banner, "\n"); !strings.Contains(banner, config.DevScheduleName+" (0 8 * * *)") {
		t.Errorf("the banner does not name the sample schedule:\n%s", banner)
	}
	var list struct {
		Schedules []struct {
			Name, Cron, Agent string
			Enabled           bool
			Next              time.Time
		}
	}
	d.do("GET", "/v1/schedules", nil, "", &list)
	if len(list.Schedules) != 1 || list.Schedules[0].Name != config.DevScheduleName || !list.Schedules[0].Enabled ||
		list.Schedules[0].Agent != devAgentName || list.Schedules[0].Next.IsZero() || list.Schedules[0].Next.Hour() != 8 {
		t.Fatalf("dev schedules: %+v", list)
	}
	d.runNow(config.DevScheduleName)
	d.waitSink("the sample schedule's result at the sink", "The dev agent received: Today's tasks")
	// The dev agent's card offers push notifications: it answers the turn
	// working, then pushes the completed task, and the run says so.
	answeredBy := d.succeededRun(30*time.Second, "the succeeded run")
	d.a.devAgent.mu.Lock()
	pushes := d.a.devAgent.pushes
	d.a.devAgent.mu.Unlock()
	if got := answeredBy; got != "push" || pushes != 1 {
		t.Errorf("the dev agent's run was answered by %q after %d accepted pushes, want push after 1", got, pushes)
	}
}
