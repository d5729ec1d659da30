#!/usr/bin/env bash
# Installs Dovecot's IMAP server (Debian dovecot-imapd) for the email
# channel's integration tests, when it is missing and we are root. The tests
# run their own standalone instance (config, passwd-file and maildir in a
# temp dir, 127.0.0.1, plaintext auth); the system service is not used.
set -euo pipefail

if command -v dovecot >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" != "0" ]; then
	echo "dovecot.sh: dovecot is missing and we are not root; email IMAP tests will skip" >&2
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends dovecot-imapd >/dev/null 2>&1; then
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends dovecot-imapd >/dev/null
fi
# The package may start the system service; the tests do not need it.
if command -v service >/dev/null 2>&1; then
	service dovecot stop >/dev/null 2>&1 || true
fi
command -v dovecot >/dev/null
