package email

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels/email/smtptest"
	"github.com/cool-ai/beachd/internal/testkit/poll"
	"github.com/cool-ai/beachd/store/bolt"
	"github.com/cool-ai/beachd/store/storetest"
	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
)

// startMemIMAP serves go-imap's in-memory server with the given
// capabilities, in TLS mode none, starttls or tls.
func startMemIMAP(t *testing.T, caps imap.CapSet, mode string) (port int, clientTLS *tls.Config) {
	t.Helper()
	mem := imapmemserver.New()
	u := imapmemserver.NewUser("agent@beachd.localhost", "pw")
	if err := u.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(u)
	opts := &imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			// As the dev server does: go-imap's in-memory server does not
			// report at IDLE the changes made just before it (IdleFlushing).
			return IdleFlushing(mem.NewSession()), nil, nil
		},
		Caps: caps, InsecureAuth: mode == TLSNone, Logger: slogLogger{testLogger(t), t.Context()},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if mode != TLSNone {
		serverTLS, pool, err := smtptest.SelfSigned()
		if err != nil {
			t.Fatal(err)
		}
		clientTLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
		if mode == TLSImplicit {
			ln = tls.NewListener(ln, serverTLS)
		} else {
			opts.TLSConfig = serverTLS
			opts.Caps[imap.CapStartTLS] = struct{}{}
		}
	}
	srv := imapserver.New(opts)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port, clientTLS
}

func TestIntakeTLSModesAndPolling(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode string
		caps imap.CapSet
	}{
		{"implicit tls, idle", TLSImplicit, imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIdle: {}, imap.CapMove: {}, imap.CapUIDPlus: {}}},
		{"starttls, idle", TLSStartTLS, imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIdle: {}, imap.CapMove: {}, imap.CapUIDPlus: {}}},
		// No IDLE and no MOVE: polling, and COPY + \\Deleted + EXPUNGE.
		{"plain, no idle, no move", TLSNone, imap.CapSet{imap.CapIMAP4rev1: {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port, clientTLS := startMemIMAP(t, tc.caps, tc.mode)
			db := storetest.Open(t, bolt.Options{})
			dec := &recDecider{}
			cfg := IntakeConfig{Host: "127.0.0.1", Port: port, TLS: tc.mode, TLSConfig: clientTLS,
				Username: "agent@beachd.localhost", Password: "pw", PollInterval: 100 * time.Millisecond, IdleRefresh: 20 * time.Minute,
				CommandTimeout: 5 * time.Second, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
				Parse: ParseOptions{ReplyDomain: "beachd.localhost", ReplyLocal: "agent", TrustUnauthenticated: true}}
			runIntake(t, cfg, db, dec)
			mta := openMailboxTLS(t, port, tc.mode, clientTLS)
			mta.appendMsg("INBOX", replyMsg(1, "tls1@example.com", "Approve"))
			poll.Eventually(t, 10*time.Second, "handled", func() bool { return len(dec.inbound()) == 1 })
			poll.Eventually(t, 5*time.Second, "moved", func() bool {
				n, _ := mta.count("INBOX")
				p, seen := mta.count("Processed")
				return n == 0 && p == 1 && seen == 1
			})
		})
	}
}
