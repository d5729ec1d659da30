// Package deploy holds what runs beachd outside a development checkout: the
// systemd unit (beachd.service) and, in healthcheck/, the probe the container
// image's HEALTHCHECK runs. The Dockerfile is at the repository root. The
// tests here check that the unit parses (systemd-analyze) and keeps its
// hardening, and build and start the container image where a Docker engine
// runs. docs/deployment.md explains how to use them.
package deploy
