package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/alecthomas/kong"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type cli struct {
	ConfigPath string `name:"config" short:"c" default:"beachd.yaml" help:"Configuration file." type:"path"`

	Serve      ServeCmd      `cmd:"" help:"Run the daemon with the configuration file."`
	Dev        DevCmd        `cmd:"" help:"Run the daemon on an embedded default: local data dir, local mail server, webhook sink, recorded SMS/WhatsApp."`
	Send       SendCmd       `cmd:"" help:"Send an envelope through a running beachd."`
	Render     RenderCmd     `cmd:"" help:"Print the rendition of an envelope for one channel, exactly as it would be sent: as configured in --config when given, else on the built-in defaults."`
	Inbound    InboundCmd    `cmd:"" help:"Show what beachd makes of an inbound message."`
	Deliveries DeliveriesCmd `cmd:"" help:"List, show and retry deliveries of a running beachd."`
	Approvals  ApprovalsCmd  `cmd:"" help:"List, show and decide approvals of a running beachd."`
	Schedules  SchedulesCmd  `cmd:"" help:"List and fire schedules of a running beachd."`
	Config     ConfigCmd     `cmd:"" help:"Check the configuration."`
	Version    VersionCmd    `cmd:"" help:"Print the version."`
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
	fmt.Fprintln(g.stdout, "beachd", version)
	return nil
}

// ConfigCmd groups configuration commands.
type ConfigCmd struct {
	Check ConfigCheckCmd `cmd:"" help:"Load and validate the configuration file and templates; print every problem."`
}

// ConfigCheckCmd validates the configuration.
type ConfigCheckCmd struct{}

// Run validates the configuration and the template override directory,
// and prints every problem at once: what `beachd serve` would refuse.
func (ConfigCheckCmd) Run(g *globals) error {
	if _, _, err := loadServeConfig(g.configPath, g.getenv); err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "%s: ok\n", g.configPath)
	return nil
}
