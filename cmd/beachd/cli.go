package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/cool-ai/beachd/config"
)

// version is set at build time with -ldflags "-X main.version=…"; when
// it is not, `beachd version` reads the module version and commit the Go
// toolchain recorded in the binary.
var version = ""

type cli struct {
	ConfigPath string `name:"config" short:"c" default:"beachd.yaml" help:"Configuration file." type:"path"`

	Serve         ServeCmd         `cmd:"" help:"Run the daemon with the configuration file."`
	Dev           DevCmd           `cmd:"" help:"Run the daemon on an embedded default: local data dir, local mail server, webhook sink, recorded SMS/WhatsApp."`
	Send          SendCmd          `cmd:"" help:"Send an envelope through a running beachd."`
	Render        RenderCmd        `cmd:"" help:"Print the rendition of an envelope for one channel, exactly as it would be sent: as configured in --config when given, else on the built-in defaults."`
	Inbound       InboundCmd       `cmd:"" help:"Show what beachd makes of an inbound message; list what a running beachd received."`
	Deliveries    DeliveriesCmd    `cmd:"" help:"List, show and retry deliveries of a running beachd."`
	Approvals     ApprovalsCmd     `cmd:"" help:"List, show and decide approvals of a running beachd."`
	Schedules     SchedulesCmd     `cmd:"" help:"List and fire schedules of a running beachd."`
	Agents        AgentsCmd        `cmd:"" help:"List the agents of a running beachd and the A2A generation it speaks to each."`
	Conversations ConversationsCmd `cmd:"" help:"List and show the conversations people have with agents of a running beachd."`
	Config        ConfigCmd        `cmd:"" help:"Check the configuration."`
	Secret        SecretCmd        `cmd:"" help:"Make secrets for the configuration (a webhook signing secret)."`
	Version       VersionCmd       `cmd:"" help:"Print the version."`
}

// exitError carries an exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// run is the whole program: parse args, run the command, map the outcome to
// an exit code (0 ok, 1 failure, 2 usage).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var c cli
	exitCode := -1
	parser, err := kong.New(&c,
		kong.Name("beachd"),
		kong.Description("beachd delivers Beach agent envelopes by email, SMS, WhatsApp and webhooks, and brings approvals back."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exitCode = code }),
		kong.UsageOnError(),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
	if err != nil {
		fmt.Fprintln(stderr, "beachd:", err)
		return 1
	}
	kctx, err := parser.Parse(args)
	if exitCode >= 0 { // --help
		return exitCode
	}
	if err != nil {
		fmt.Fprintln(stderr, "beachd:", err)
		return 2
	}
	g := &globals{stdout: stdout, stderr: stderr, getenv: getenv, now: time.Now, ctx: ctx, configPath: c.ConfigPath}
	if err := kctx.Run(g, configGiven(flagGiven(kctx, "config"))); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			fmt.Fprintln(stderr, "beachd:", ee.err)
			return ee.code
		}
		fmt.Fprintln(stderr, "beachd:", err)
		return 1
	}
	return 0
}

// configGiven says whether --config was on the command line. Commands
// that work without a configuration file (render) read one only when it is
// named; the others read the default, beachd.yaml.
type configGiven bool

// flagGiven reports whether the flag was on the command line, rather than
// at its default.
func flagGiven(kctx *kong.Context, name string) bool {
	for _, p := range kctx.Path {
		if p.Flag != nil && p.Flag.Name == name {
			return true
		}
	}
	return false
}

// VersionCmd prints the version.
type VersionCmd struct{}

// Run prints the version.
func (VersionCmd) Run(g *globals) error {
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintln(g.stdout, "beachd", versionString(version, info))
	return nil
}

// versionString is the version set at build time (-ldflags "-X
// main.version=…"), else what the Go toolchain recorded in the binary: the
// module version ("v1.2.0" from go install …@v1.2.0; for go build in a git
// checkout, the tag or a pseudo-version naming the commit; "(devel)" when
// the toolchain recorded none, as go run does), then the commit, its
// time, and "modified" when the tree had uncommitted changes.
func versionString(ldflags string, info *debug.BuildInfo) string {
	if ldflags != "" && ldflags != "dev" {
		return ldflags
	}
	if info == nil {
		return "dev (no build information)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var extra []string
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		extra = append(extra, "commit "+rev)
	}
	if at != "" {
		extra = append(extra, at)
	}
	if modified {
		extra = append(extra, "modified")
	}
	if rev == "" && v == "(devel)" {
		// Built in a checkout without the commit: go run records none,
		// nor does go build with -buildvcs=false.
		extra = append(extra, "no commit recorded: `go build ./cmd/beachd` in a git checkout records it")
	}
	if info.GoVersion != "" {
		extra = append(extra, info.GoVersion)
	}
	if len(extra) > 0 {
		v += " (" + strings.Join(extra, ", ") + ")"
	}
	return v
}

// ConfigCmd groups configuration commands.
type ConfigCmd struct {
	Check ConfigCheckCmd `cmd:"" help:"Load and validate the configuration file and templates; print every problem."`
}

// ConfigCheckCmd validates the configuration.
type ConfigCheckCmd struct{}

// Run validates the configuration and the template override directory,
// and prints every problem at once: what `beachd serve` would refuse. With
// store.driver postgres it connects to the database, without changing it,
// and says its schema version.
func (ConfigCheckCmd) Run(g *globals) error {
	cfg, _, err := config.Check(g.configPath, g.getenv, false)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(g.stdout, "%s: warning: %s\n", g.configPath, w)
	}
	info, err := cfg.Store.Probe(g.ctx)
	if err != nil {
		return config.KeyError(g.configPath, "store.dsn", err)
	}
	if info != "" {
		fmt.Fprintln(g.stdout, info)
	}
	fmt.Fprintf(g.stdout, "%s: ok\n", g.configPath)
	return nil
}
