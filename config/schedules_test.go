package config

import (
	"strings"
	"testing"
	"time"
)

const scheduleBase = `
api_keys: ["0123456789abcdef0123"]
agents:
  travel: { a2a_url: "http://127.0.0.1:9/" }
  hooky: { injector: webhook, webhook_url: "http://127.0.0.1:9/hook", webhook_secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }
`

func TestScheduleConfig(t *testing.T) {
	good := scheduleBase + `
schedules:
  - name: morning-brief
    cron: "CRON_TZ=Europe/London 0 8 * * 1-5"
    agent: travel
    message: "Today's tasks"
    to: [ {channel: email, address: alice@example.org} ]
    timeout: 2m
    retries: 2
    retry_delay: 30s
    catch_up: run_once
    overlap: queue
    error_notice: true
  - { name: weekly, cron: "@weekly", time_zone: America/New_York, agent: travel, message: "Week", enabled: false,
      to: [ {channel: sms, address: "+15550001111"} ] }
`
	cfg, err := Parse([]byte(good), "good.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Validate(); err != nil && strings.Contains(err.Error(), "schedules") {
		t.Fatalf("good schedules refused: %v", err)
	}
	d := cfg.Schedules[0].Definition()
	if d.Timeout != 2*time.Minute || d.RetryDelay != 30*time.Second || d.Retries != 2 || d.CatchUp != "run_once" ||
		d.Overlap != "queue" || !d.ErrorNotice || d.Disabled || d.To[0].Address != "alice@example.org" {
		t.Fatalf("definition = %+v", d)
	}
	if !cfg.Schedules[1].Definition().Disabled {
		t.Fatal("enabled: false not honoured")
	}

	bad := scheduleBase + `
schedules:
  - { name: a, cron: "0 0 30 2 *", agent: travel, message: m, to: [ {channel: email, address: a@example.org} ] }
  - { name: b, cron: "0 8 * * *", time_zone: Mars/Base, agent: travel, message: m, to: [ {channel: email, address: a@example.org} ] }
  - { name: c, cron: "0 8 * * *", agent: nobody, message: m, to: [ {channel: email, address: a@example.org} ] }
  - { name: d, cron: "0 8 * * *", agent: travel, message: m }
  - { name: e, cron: "0 8 * * *", agent: hooky, message: m, to: [ {channel: webhook, endpoint: nowhere} ] }
  - { name: f, cron: "CRON_TZ=UTC 0 8 * * *", time_zone: Europe/Paris, agent: travel, message: m, to: [ {channel: email, address: a@example.org} ] }
`
	cfg, err = Parse([]byte(bad), "bad.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Validate()
	if err == nil {
		t.Fatal("bad schedules accepted")
	}
	for _, want := range []string{
		`schedules[0].cron: schedule "a": spec "0 0 30 2 *" never fires`,
		`schedules[1].time_zone: schedule "b": unknown time zone "Mars/Base"`,
		`schedules[2].agent: schedule "c": unknown agent "nobody"`,
		`schedules[3].to: schedule "d": at least one recipient is required`,
		`schedules[4].agent: schedule "e": agent "hooky" has no a2a_url`,
		`schedules[4].to[0].endpoint: schedule "e": unknown webhook endpoint "nowhere"`,
		`schedules[5].cron: schedule "f": spec says time zone "UTC" but time_zone is "Europe/Paris"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing problem %q in:\n%v", want, err)
		}
	}

	if _, err := Parse([]byte(scheduleBase+"schedules:\n  - { name: x, crontab: '* * * * *' }\n"), "k.yaml",
		func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "crontab") {
		t.Fatalf("unknown key: %v", err)
	}
}
