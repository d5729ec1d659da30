#!/usr/bin/env bash
# Installs Debian's postfix for beachd-bench -postfix (beachd beside Postfix,
# relaying to the same local SMTP sink), when it is missing and we are root.
# The bench runs its own throwaway instance (`postfix -c DIR start` with its
# own queue_directory, data_directory, loopback only, a non-25 port); the
# system service is stopped after the install.
set -euo pipefail

if command -v postfix >/dev/null 2>&1 || [ -x /usr/sbin/postfix ]; then
	exit 0
fi
if [ "$(id -u)" != "0" ]; then
	echo "postfix.sh: postfix is missing and we are not root; beachd-bench -postfix will refuse to run" >&2
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# No questions: a "No configuration" install; the bench writes its own config.
echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
if ! apt-get install -y --no-install-recommends postfix >/dev/null 2>&1; then
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends postfix >/dev/null
fi
if command -v service >/dev/null 2>&1; then
	service postfix stop >/dev/null 2>&1 || true
fi
/usr/sbin/postfix stop >/dev/null 2>&1 || true
test -x /usr/sbin/postfix
