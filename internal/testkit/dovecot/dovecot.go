// Package dovecot starts a standalone Dovecot (Debian dovecot-imapd,
// installed by scripts/peers/dovecot.sh) for one test: configuration,
// passwd-file and maildir under a temporary directory, plaintext IMAP on
// 127.0.0.1, one user. Without Dovecot the test is skipped, loudly, and
// under CI it fails.
package dovecot

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is one running Dovecot.
type Server struct {
	t    testing.TB
	dir  string
	conf string
	bin  string
	// Port is the IMAP port on 127.0.0.1.
	Port int
	// User and Password log in.
	User, Password string
	cmd            *exec.Cmd
	done           chan struct{}
}

// Start writes the configuration and starts Dovecot; it is stopped when
// the test ends. what names the tests in the skip message.
func Start(t testing.TB, what, username, password string) *Server {
	t.Helper()
	bin, err := exec.LookPath("dovecot")
	if err != nil {
		if _, err := os.Stat("/usr/sbin/dovecot"); err != nil {
			msg := "SKIPPING " + what + ": dovecot is not installed (run scripts/peers/dovecot.sh as root)"
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		bin = "/usr/sbin/dovecot"
	}
	dir, err := os.MkdirTemp("", "beachd-dovecot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"run", "state", "home"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	// As root the mail processes run as nobody (Dovecot refuses uid 0);
	// otherwise everything runs as the current user.
	uid, gid := os.Getuid(), os.Getgid()
	var users string
	if uid == 0 {
		uid, gid = 65534, 65534
		if err := os.Chown(filepath.Join(dir, "home"), uid, gid); err != nil {
			t.Fatal(err)
		}
	} else {
		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		users = fmt.Sprintf("default_internal_user = %s\ndefault_login_user = %s\n", u.Username, u.Username)
	}
	passwd := filepath.Join(dir, "passwd")
	if err := os.WriteFile(passwd, []byte(username+":{PLAIN}"+password+":::::\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "dovecot.conf")
	cfg := fmt.Sprintf(`base_dir = %[1]s/run
state_dir = %[1]s/state
log_path = %[1]s/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_max_userip_connections = 100
%[4]spassdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%%u %[5]s
}
userdb {
  driver = static
  args = uid=%[2]d gid=%[3]d home=%[1]s/home/%%u
}
mail_location = maildir:~/Maildir
first_valid_uid = 1
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = %[6]d
  }
  inet_listener imaps {
    port = 0
  }
}
service pop3-login {
  inet_listener pop3 {
    port = 0
  }
}
service submission-login {
  inet_listener submission {
    port = 0
  }
}
`, dir, uid, gid, users, passwd, port)
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, dir: dir, conf: conf, bin: bin, Port: port, User: username, Password: password}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Addr is host:port of the IMAP listener.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// Start starts Dovecot again after Stop (Start above runs it the first
// time) and waits for its greeting.
func (s *Server) Start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "-F", "-c", s.conf)
	s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			buf := make([]byte, 64)
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _ := c.Read(buf)
			c.Close()
			if strings.HasPrefix(string(buf[:n]), "* OK") {
				return
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "dovecot.log"))
			s.t.Fatalf("dovecot did not start: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops Dovecot (SIGTERM, then SIGKILL after 10 s).
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Doveadm runs doveadm against this server's configuration.
func (s *Server) Doveadm(args ...string) {
	s.t.Helper()
	out, err := exec.Command("doveadm", append([]string{"-c", s.conf}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("doveadm %v: %v\n%s", args, err, out)
	}
}
