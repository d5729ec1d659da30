package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cool-ai/beachd/internal/testkit/fakeclock"
	"github.com/cool-ai/beachd/store"
	"github.com/cool-ai/beachd/store/postgres/pgtest"
)

// TestIDListStatementsArePlannedEachTime: the statements that find rows by
// a list of ids are never prepared on a connection, so PostgreSQL never
// runs them from a generic plan made while the table was small
// (DB.planEach). The workload runs each of them more than the five times
// after which a prepared statement's plan may turn generic: claims,
// outcomes by the claim's copy (recordClaimed) and by locked rows
// (recordTx, for outcomes with a provider id), envelope reads and an
// idempotent replay.
func TestIDListStatementsArePlannedEachTime(t *testing.T) {
	c := dlvClock()
	db := openDlv(t, c)
	idListWorkload(t, db, c)
	conns := db.pool.AcquireAllIdle(dlvCtx)
	if len(conns) == 0 {
		t.Fatal("no idle connection to look at")
	}
	for _, conn := range conns {
		rows, err := conn.Query(dlvCtx, `SELECT statement, generic_plans FROM pg_prepared_statements`)
		if err != nil {
			t.Fatal(err)
		}
		var prepared int
		for rows.Next() {
			var sql string
			var generic int64
			if err := rows.Scan(&sql, &generic); err != nil {
				t.Fatal(err)
			}
			prepared++
			if strings.Contains(sql, "= ANY(") || strings.Contains(sql, "d.id = u.id") || strings.Contains(sql, "USING unnest") {
				t.Errorf("prepared (%d generic plans so far): %s", generic, strings.Join(strings.Fields(sql), " "))
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if prepared == 0 {
			t.Errorf("no prepared statement on a connection: the check would see nothing")
		}
		conn.Release()
	}
}

// idListWorkload runs each statement that finds rows by a list of ids
// eight times on db.
func idListWorkload(t *testing.T, db *DB, c *fakeclock.Clock) {
	t.Helper()
	for i := range 8 {
		ingestN(t, db, 3)
		key := "replay-" + string(rune('a'+i))
		for range 2 {
			if _, err := db.Ingest(dlvCtx, store.Ingest{Envelope: []byte(`{"role":"agent"}`), IdempotencyKey: key,
				Deliveries: []store.NewDelivery{{Channel: "webhook", To: "ep"}}}); err != nil {
				t.Fatal(err)
			}
		}
		claimed, err := db.Claim(dlvCtx, 10, time.Minute, nil)
		if err != nil || len(claimed) != 4 {
			t.Fatalf("claim: %d jobs, %v", len(claimed), err)
		}
		var envs []string
		for j, d := range claimed {
			o := store.Outcome{State: store.StateSent, Attempt: store.Attempt{At: c.Now(), Outcome: "sent"}}
			if j%2 == 1 {
				o.ProviderID = "pid-" + d.ID
			}
			if _, err := db.Record(dlvCtx, d.ID, d.LeaseUntil, o); err != nil {
				t.Fatalf("record %s: %v", d.ID, err)
			}
			envs = append(envs, d.EnvelopeID)
		}
		if _, err := db.Envelopes(dlvCtx, envs); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
	}
}

// TestPlanEachModeKeepsTheDSNsChoice: a DSN that chose how statements run
// keeps its choice for these statements too, and one without pgx's
// description cache has them described first; each such store runs the
// workload and is left consistent.
func TestPlanEachModeKeepsTheDSNsChoice(t *testing.T) {
	for _, m := range []struct {
		param string
		want  pgx.QueryExecMode
	}{
		{"", pgx.QueryExecModeCacheDescribe},
		{"&default_query_exec_mode=simple_protocol", pgx.QueryExecModeSimpleProtocol},
		{"&default_query_exec_mode=exec", pgx.QueryExecModeExec},
		{"&description_cache_capacity=0", pgx.QueryExecModeDescribeExec},
	} {
		c := dlvClock()
		db, err := Open(dlvCtx, pgtest.DSN(t)+m.param, Options{Now: c.Now})
		if err != nil {
			t.Fatalf("open with %q: %v", m.param, err)
		}
		t.Cleanup(func() { db.Close() })
		checkDlvAtEnd(t, db)
		if db.planEach != m.want {
			t.Errorf("%q: mode %v, want %v", m.param, db.planEach, m.want)
		}
		idListWorkload(t, db, c)
	}
}
