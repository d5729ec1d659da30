package policy

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cool-ai/beachd/envelope"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// Decisions a policy takes at ingest (Definition.Decide).
const (
	DecideGranted = envelope.DecisionGranted
	DecideDenied  = envelope.DecisionDenied
)

// Reserved names: decidedBy already says "policy:expired", and operators
// decide as "operator".
var Reserved = map[string]bool{"expired": true, "operator": true}

// MaxExpression bounds the length of a CEL expression.
const MaxExpression = 4096

// CostLimit bounds the evaluation of one expression (CEL's cost units,
// about one per operation): generous for a predicate over a tool's
// arguments, short of anything that would slow ingest.
const CostLimit = 100_000

// Definition is one policy as the operator wrote it.
type Definition struct {
	Name string
	// Agent and Tool restrict the policy to the delivery's agent and the
	// request's toolName; "" matches any.
	Agent, Tool string
	// When is a CEL expression over args, agent, tool and now; "" is true.
	When string
	// Decide ("granted" or "denied") decides at ingest; nobody is asked.
	Decide string
	// Quorum is how many distinct people must grant (default 1).
	Quorum int
	// Steps ask people in turn; none: one step, the delivery's recipients.
	Steps []Step
	// QuietHours, when set, defer SMS and WhatsApp reminders and
	// escalations to the end of the window.
	QuietHours *QuietHours
}

// Step is one rung of a policy's ladder.
type Step struct {
	// Envelope: the delivery's own recipients, each a person.
	Envelope bool
	People   []Person
	// RemindAfter (after the step was asked) sends one reminder to those of
	// the step who have not answered; EscalateAfter asks the next step.
	// Zero: never.
	RemindAfter, EscalateAfter time.Duration
}

// Person is someone a step asks: one recipient, or a named person asked on
// each of their channels, who counts once.
type Person struct {
	// Name is the person's name ("carol"); "" for a single recipient.
	Name     string
	Channels []envelope.Recipient
}

// ID is how the person is named in decidedBy and votes: the name, else
// the recipient's address.
func (p Person) ID() string {
	if p.Name != "" {
		return p.Name
	}
	if len(p.Channels) == 1 {
		return p.Channels[0].Target()
	}
	return ""
}

// Policy is a compiled Definition.
type Policy struct {
	Definition
	prg cel.Program
}

// ExplicitPeople counts the distinct people the policy's explicit steps
// name (the delivery's recipients, `to: envelope`, are counted at ingest).
func (p *Policy) ExplicitPeople() int {
	return ExplicitPeople(p.Steps)
}

// ExplicitPeople counts the distinct people of steps (by ID).
func ExplicitPeople(steps []Step) int {
	seen := map[string]bool{}
	for _, s := range steps {
		for _, pr := range s.People {
			seen[pr.ID()] = true
		}
	}
	return len(seen)
}

// HasEnvelopeStep reports whether a step asks the delivery's recipients.
func (p *Policy) HasEnvelopeStep() bool {
	for _, s := range p.Steps {
		if s.Envelope {
			return true
		}
	}
	return false
}

// ExprError is an expression that does not compile: where in it (1-based
// line and column within the expression) and why.
type ExprError struct {
	Line, Column int
	Reason       string
}

func (e *ExprError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("expression line %d, column %d: %s", e.Line, e.Column, e.Reason)
	}
	return e.Reason
}

var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("agent", cel.StringType),
		cel.Variable("tool", cel.StringType),
		cel.Variable("now", cel.TimestampType),
	)
})

// Compile compiles and type-checks a CEL expression over args, agent, tool
// and now, which must yield a bool. The error is an *ExprError.
func Compile(expr string) (cel.Program, error) {
	if len(expr) > MaxExpression {
		return nil, &ExprError{Reason: fmt.Sprintf("longer than %d bytes", MaxExpression)}
	}
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("cel environment: %w", err)
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		errs := iss.Errors()
		e := &ExprError{Reason: strings.TrimSpace(iss.Err().Error())}
		if len(errs) > 0 {
			e.Reason = strings.TrimSuffix(errs[0].Message, " (in container '')")
			if loc := errs[0].Location; loc != nil && loc.Line() > 0 {
				e.Line, e.Column = loc.Line(), loc.Column()+1
			}
		}
		return nil, e
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, &ExprError{Reason: fmt.Sprintf("must be true or false, but yields %s", t)}
	}
	prg, err := env.Program(ast, cel.CostLimit(CostLimit))
	if err != nil {
		return nil, &ExprError{Reason: err.Error()}
	}
	return prg, nil
}

// Set is the configured policies, in order.
type Set struct {
	policies []*Policy
	log      *slog.Logger
	// failed holds the names of policies whose expression failed at run
	// time and was logged (once per policy).
	failed sync.Map
}

// New compiles defs. The configuration package has checked them; an
// expression that does not compile is an error naming its policy.
func New(defs []Definition, log *slog.Logger) (*Set, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Set{log: log}
	var errs []error
	for _, d := range defs {
		p := &Policy{Definition: d}
		if p.Quorum <= 0 {
			p.Quorum = 1
		}
		if p.Decide == "" && len(p.Steps) == 0 {
			p.Steps = []Step{{Envelope: true}}
		}
		if strings.TrimSpace(d.When) != "" {
			prg, err := Compile(d.When)
			if err != nil {
				errs = append(errs, fmt.Errorf("policy %s: when: %w", d.Name, err))
				continue
			}
			p.prg = prg
		}
		s.policies = append(s.policies, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// Len is the number of policies.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.policies)
}

// Policy returns the policy named name, or nil.
func (s *Set) Policy(name string) *Policy {
	if s == nil {
		return nil
	}
	for _, p := range s.policies {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Match returns the first policy whose agent, tool and expression fit the
// request, or nil (no policy: the request is asked as it always was).
// agent is the delivery's agent. An expression that fails at run time (a
// missing argument, a wrong type, the cost limit) does not match.
func (s *Set) Match(agent, tool string, args map[string]any, now time.Time) *Policy {
	if s == nil {
		return nil
	}
	for _, p := range s.policies {
		if p.Agent != "" && p.Agent != agent || p.Tool != "" && p.Tool != tool {
			continue
		}
		if p.prg == nil {
			return p
		}
		if args == nil {
			args = map[string]any{}
		}
		out, _, err := p.prg.Eval(map[string]any{"args": args, "agent": agent, "tool": tool, "now": now.UTC()})
		if err == nil {
			if b, ok := out.Value().(bool); ok {
				if b {
					return p
				}
				continue
			}
			err = fmt.Errorf("yields %s, not true or false", out.Type().TypeName())
		}
		if _, logged := s.failed.LoadOrStore(p.Name, true); !logged {
			s.log.Warn("approval policy expression failed: the policy does not match", "policy", p.Name, "err", err)
		}
	}
	return nil
}
