// Command beachd is the delivery daemon of the Beach agent framework: it
// delivers settled response envelopes by email, SMS, WhatsApp and signed
// webhooks, brings approval decisions back into suspended turns, and starts
// agent turns on a schedule. See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// beachd's live heap is small and its garbage short-lived: collecting
		// half as often costs little memory and saves CPU on the hot path.
		debug.SetGCPercent(200)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
		// A second signal forces the exit.
		force := make(chan os.Signal, 1)
		signal.Notify(force, os.Interrupt, syscall.SIGTERM)
		<-force
		fmt.Fprintln(os.Stderr, "beachd: second signal, exiting now")
		os.Exit(1)
	}()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// globals are what every command's Run receives.
type globals struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	ctx            context.Context
	configPath     string
}
