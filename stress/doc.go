// Package stress holds beachd's fault suite and the process probes
// (goroutines, open descriptors, RSS) its fault, crash and load harnesses
// share. The fault suite (faults_test.go) drives the real
// channels.Dispatcher and bolt.DB through toxiproxy proxies to the shared
// fake SMTP server (channels/email/smtptest) and fake Twilio
// (channels/twilio/twiliotest), the peers cmd/beachd's stress tests and
// cmd/beachd-bench use too.
package stress
