package channeltest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cool-ai/beachd/channels"
)

// memory is an in-memory provider and deliverer; defect breaks one rule.
type memory struct {
	defect string
	mu     sync.Mutex
	fail   Failure
	keys   []string
	n      int
}

func (m *memory) Fail(f Failure) { m.mu.Lock(); m.fail = f; m.mu.Unlock() }
func (m *memory) Heal()          { m.Fail(0) }
func (m *memory) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.keys...)
}

func (m *memory) Deliver(ctx context.Context, job *channels.Job) (*channels.Result, error) {
	m.mu.Lock()
	f := m.fail
	m.n++
	key := "<" + job.Delivery.ID + "@beachd.test>"
	if m.defect == CheckStableID || (m.defect == CheckMaybeSent && job.Delivery.MaybeSent) {
		key = fmt.Sprintf("<%d@beachd.test>", m.n) // a new id on every attempt
	}
	m.mu.Unlock()
	switch f {
	case Permanent, Temporary:
		if m.defect == CheckClassification {
			return nil, channels.Temporary(fmt.Errorf("refused")) // everything temporary
		}
		return nil, &channels.Error{Permanent: f == Permanent, Err: fmt.Errorf("refused (%s)", f)}
	case Hang:
		if m.defect == CheckDeadline {
			time.Sleep(2500 * time.Millisecond) // ignores the context
		} else {
			<-ctx.Done()
		}
		return nil, &channels.Error{Err: ctx.Err()}
	}
	m.mu.Lock()
	m.keys = append(m.keys, key)
	m.mu.Unlock()
	return &channels.Result{ProviderID: key}, nil
}

func subject(defect string) Subject {
	return Subject{Channel: "webhook", To: "ops", New: func(t *testing.T) (channels.Deliverer, Peer) {
		m := &memory{defect: defect}
		return m, m
	}}
}

// A deliverer that keeps every rule passes.
func TestConformingDelivererPasses(t *testing.T) { Run(t, subject("")) }

// TestDefective runs the suite against a deliverer with the defect named by
// CHANNELTEST_DEFECT; TestSuiteCatchesDefects runs it in a child process
// and expects it to fail at that check.
func TestDefective(t *testing.T) {
	defect := os.Getenv("CHANNELTEST_DEFECT")
	if defect == "" {
		t.Skip("run by TestSuiteCatchesDefects")
	}
	Run(t, subject(defect))
}

func TestSuiteCatchesDefects(t *testing.T) {
	for _, defect := range []string{CheckStableID, CheckClassification, CheckDeadline, CheckMaybeSent} {
		t.Run(defect, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestDefective$", "-test.v")
			cmd.Env = append(os.Environ(), "CHANNELTEST_DEFECT="+defect)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a deliverer with a %s defect:\n%s", defect, out)
			}
			if want := "--- FAIL: TestDefective/" + defect; !strings.Contains(string(out), want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
		})
	}
}

// An unknown channel is refused before any check runs.
func TestUnknownChannelRefused(t *testing.T) {
	if os.Getenv("CHANNELTEST_UNKNOWN") != "" {
		s := subject("")
		s.Channel = "telegram"
		Run(t, s)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnknownChannelRefused$")
	cmd.Env = append(os.Environ(), "CHANNELTEST_UNKNOWN=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `"telegram" has no spec`) {
		t.Fatalf("err %v, output:\n%s", err, out)
	}
}
