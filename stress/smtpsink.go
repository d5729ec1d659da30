package stress

import "github.com/cool-ai/beachd/channels/email/smtptest"

// SMTPSink is the shared fake SMTP server (package smtptest), kept under
// this name for the benchmarks and the daemon's end-to-end tests.
type SMTPSink = smtptest.Server

// SMTPMessage is one message the sink accepted.
type SMTPMessage = smtptest.Message

// SMTPStats are the sink's counters.
type SMTPStats = smtptest.Stats

// StartSMTPSink serves s (a new sink when nil) on 127.0.0.1:0 without TLS.
// Set the hooks before the first message; Close stops it.
func StartSMTPSink(s *SMTPSink) (*SMTPSink, error) {
	if s == nil {
		s = &SMTPSink{}
	}
	if _, err := s.Listen(smtptest.Plain); err != nil {
		return nil, err
	}
	return s, nil
}
