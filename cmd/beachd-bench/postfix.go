package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cool-ai/beachd/channels/email/smtptest"
)

// side is one MTA's figures in the Postfix comparison.
type side struct {
	Accepted        int     `json:"accepted"`
	Delivered       int     `json:"delivered"`
	AcceptedPerSec  float64 `json:"acceptedPerSec"`
	DeliveredPerSec float64 `json:"deliveredPerSec"`
	AcceptP50ms     float64 `json:"acceptP50ms"`
	AcceptP99ms     float64 `json:"acceptP99ms"`
	Duplicates      int     `json:"duplicates"`
	MessageBytes    int     `json:"messageBytes"`
}

// postfixResult compares beachd and Postfix on the same messages to the
// same SMTP sink, both durable (beachd fsyncs before 202, Postfix before
// its 250).
type postfixResult struct {
	N              int     `json:"messages"`
	Clients        int     `json:"clients"`
	PostfixVersion string  `json:"postfixVersion"`
	PostfixConfig  string  `json:"postfixConfig"`
	AsRoot         bool    `json:"postfixRunAsRoot"`
	Beachd         side    `json:"beachd"`
	Postfix        side    `json:"postfix"`
	AcceptRatio    float64 `json:"acceptedPerSecBeachdOverPostfix"`
	DeliverRatio   float64 `json:"deliveredPerSecBeachdOverPostfix"`
	P99Ratio       float64 `json:"acceptP99BeachdOverPostfix"`
}

const postfixMain = `compatibility_level = 3.6
queue_directory = %[1]s/queue
data_directory = %[1]s/data
mail_owner = postfix
setgid_group = postdrop
inet_interfaces = loopback-only
inet_protocols = ipv4
myhostname = postfix-bench.localhost
mydomain = localhost
myorigin = $myhostname
mydestination =
local_recipient_maps =
alias_maps =
alias_database =
mynetworks = 127.0.0.0/8
relayhost = [127.0.0.1]:%[2]d
smtpd_relay_restrictions = permit_mynetworks, reject
smtpd_recipient_restrictions = permit_mynetworks, reject
smtp_tls_security_level = none
smtpd_tls_security_level = none
maillog_file = %[1]s/maillog
maillog_file_prefixes = %[1]s
smtp_address_preference = ipv4
default_destination_concurrency_limit = %[3]d
smtpd_client_connection_count_limit = 0
smtpd_client_message_rate_limit = 0
biff = no
`

const postfixMaster = `127.0.0.1:%d inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
`

func postfixBin() string {
	if p, err := exec.LookPath("postfix"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/postfix"); err == nil {
		return "/usr/sbin/postfix"
	}
	return ""
}

// postfixRun sends n messages through beachd (HTTP, email channel) and n
// through Postfix (SMTP submission), both relaying to one go-smtp sink.
func postfixRun(n, c int, bin string) (*postfixResult, error) {
	pf := postfixBin()
	if pf == "" {
		return nil, fmt.Errorf("postfix is not installed: run scripts/postfix.sh as root")
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("postfix needs root here (postfix -c DIR start runs its master as root and drops to mail_owner)")
	}
	dir, err := os.MkdirTemp("", "beachd-postfix-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if bin, err = buildBeachd(bin, dir); err != nil {
		return nil, err
	}
	sink := &smtptest.Server{Keep: true}
	if _, err := sink.Listen(smtptest.Plain); err != nil {
		return nil, err
	}
	defer sink.Close()
	const pool = 20 // beachd's SMTP pool and Postfix's destination concurrency
	res := &postfixResult{N: n, Clients: c, AsRoot: true}

	// 1. beachd.
	cfg := fmt.Sprintf(`dispatch: {workers: 64}
email:
  from: "Bench <bench@example.org>"
  smtp: {host: 127.0.0.1, port: %d, tls: none, pool_size: %d, timeout: 30s, helo: beachd-bench.localhost}
`, sink.Port(), pool)
	p, err := startDaemon(bin, dir, filepath.Join(dir, "data"), cfg, time.Minute)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConns: c, MaxIdleConnsPerHost: c}
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	body := []byte(`{"to":[{"channel":"email","address":"rcpt@example.net"}],"envelope":` + envelopeJSON + `}`)
	ids := make([]string, n)
	lat := make([]time.Duration, n)
	start := time.Now()
	err = drive(n, c, func(i int) error {
		req, _ := http.NewRequest("POST", p.base+"/v1/deliveries", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+benchKey)
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 202 {
			b, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("ingest: HTTP %d: %s", resp.StatusCode, b)
		}
		var a struct {
			Deliveries []struct{ ID string } `json:"deliveries"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || len(a.Deliveries) != 1 {
			return fmt.Errorf("ingest answer: %v", err)
		}
		lat[i], ids[i] = time.Since(t0), a.Deliveries[0].ID
		return nil
	})
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("beachd: %w\n%s", err, p.stderr)
	}
	accTook := time.Since(start)
	msgIDs := make([]string, n)
	for i, id := range ids {
		msgIDs[i] = id + "@example.org"
	}
	delTook, got := waitSink(sink, msgIDs, start, 5*time.Minute)
	p.stop()
	res.Beachd = sideOf(n, got, accTook, delTook, lat, sink, msgIDs)
	if msgs := sink.Messages(); len(msgs) > 0 {
		res.Beachd.MessageBytes = msgs[0].Size
	}

	// 2. Postfix, with a message of the same size.
	pdir := filepath.Join(dir, "postfix")
	// Postfix's daemons run as mail_owner and must reach their directories.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	for _, d := range []string{pdir, filepath.Join(pdir, "queue"), filepath.Join(pdir, "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	exec.Command("chown", "postfix", filepath.Join(pdir, "data")).Run()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	mainCf := fmt.Sprintf(postfixMain, pdir, sink.Port(), pool)
	if err := os.WriteFile(filepath.Join(pdir, "main.cf"), []byte(mainCf), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(pdir, "master.cf"), []byte(fmt.Sprintf(postfixMaster, port)), 0o644); err != nil {
		return nil, err
	}
	res.PostfixConfig = "main.cf: " + strings.ReplaceAll(strings.TrimSpace(strings.ReplaceAll(mainCf, pdir, "DIR")), "\n", "; ")
	if out, err := exec.Command(pf, "-c", pdir, "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(pdir, "maillog"))
		return nil, fmt.Errorf("postfix -c %s start: %v\n%s\n%s", pdir, err, out, log)
	}
	defer exec.Command(pf, "-c", pdir, "stop").Run()
	if out, err := exec.Command("postconf", "-c", pdir, "-h", "mail_version").Output(); err == nil {
		res.PostfixVersion = strings.TrimSpace(string(out))
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitTCP(addr, 30*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(pdir, "maillog"))
		return nil, fmt.Errorf("postfix smtpd: %w\n%s", err, log)
	}
	size := max(res.Beachd.MessageBytes, 1024)
	pfIDs := make([]string, n)
	for i := range pfIDs {
		pfIDs[i] = fmt.Sprintf("pf-%d-%d@bench.example.org", i, time.Now().UnixNano())
	}
	lat = make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	start = time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := smtp.Dial(addr)
			if err != nil {
				once.Do(func() { firstErr = err })
				return
			}
			defer cl.Close()
			if err := cl.Hello("bench-client.localhost"); err != nil {
				once.Do(func() { firstErr = err })
				return
			}
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					cl.Quit()
					return
				}
				msg := postfixMessage(pfIDs[i], size)
				t0 := time.Now()
				if err := sendOne(cl, msg); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("message %d: %w", i, err) })
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		log, _ := os.ReadFile(filepath.Join(pdir, "maillog"))
		return nil, fmt.Errorf("postfix submission: %w\n%s", firstErr, tail(log, 3000))
	}
	accTook = time.Since(start)
	delTook, got = waitSink(sink, pfIDs, start, 10*time.Minute)
	res.Postfix = sideOf(n, got, accTook, delTook, lat, sink, pfIDs)
	res.Postfix.MessageBytes = size
	if got < n {
		log, _ := os.ReadFile(filepath.Join(pdir, "maillog"))
		fmt.Fprintf(os.Stderr, "postfix delivered %d of %d; maillog tail:\n%s\n", got, n, tail(log, 3000))
	}
	res.AcceptRatio = res.Beachd.AcceptedPerSec / res.Postfix.AcceptedPerSec
	res.DeliverRatio = res.Beachd.DeliveredPerSec / res.Postfix.DeliveredPerSec
	res.P99Ratio = res.Beachd.AcceptP99ms / res.Postfix.AcceptP99ms
	return res, nil
}

func sendOne(cl *smtp.Client, msg []byte) error {
	if err := cl.Mail("bench@example.org"); err != nil {
		return err
	}
	if err := cl.Rcpt("rcpt@example.net"); err != nil {
		return err
	}
	w, err := cl.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	return w.Close() // reads the 250 (queued) reply
}

// postfixMessage is a plain message of about size bytes with our
// Message-ID.
func postfixMessage(id string, size int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: Bench <bench@example.org>\r\nTo: rcpt@example.net\r\nSubject: Two direct flights found, 15 August 2026 LGW to CFU\r\nMessage-ID: <%s>\r\nDate: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n", id, time.Now().Format(time.RFC1123Z))
	line := "Two direct flights found, 15 August 2026 LGW to CFU. Cheapest is easyJet EJ4521.\r\n"
	for b.Len() < size {
		b.WriteString(line)
	}
	return b.Bytes()
}

func waitTCP(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitSink waits until every id reached the sink; it returns the time from
// start to the last arrival and how many arrived.
func waitSink(sink *smtptest.Server, ids []string, start time.Time, within time.Duration) (time.Duration, int) {
	deadline := time.Now().Add(within)
	for {
		got := 0
		var last time.Time
		for _, id := range ids {
			if t, ok := sink.First(id); ok {
				got++
				if t.After(last) {
					last = t
				}
			}
		}
		if got == len(ids) || time.Now().After(deadline) {
			return last.Sub(start), got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sideOf(n, got int, accTook, delTook time.Duration, lat []time.Duration, sink *smtptest.Server, ids []string) side {
	s := side{Accepted: n, Delivered: got, AcceptedPerSec: float64(n) / accTook.Seconds(),
		DeliveredPerSec: float64(got) / delTook.Seconds(), AcceptP50ms: pct(lat, 50), AcceptP99ms: pct(lat, 99)}
	for _, id := range ids {
		if c := sink.Count(id); c > 1 {
			s.Duplicates += c - 1
		}
	}
	return s
}
