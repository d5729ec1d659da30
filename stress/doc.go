// Package stress holds the peers and measurements beachd's fault, crash
// and load harnesses share: a go-smtp sink that records messages by
// Message-ID, a fake Twilio Messages API that records by From/To/Body and
// answers SIDs, and process probes (goroutines, open descriptors, RSS).
// The fault suite (faults_test.go) drives the real channels.Dispatcher and
// store.DB through toxiproxy proxies to these peers; cmd/beachd's stress
// tests and cmd/beachd-bench reuse the peers.
package stress
