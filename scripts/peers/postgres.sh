#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers for the PostgreSQL backend's tests
# (store/postgres, the replica tests): the one at $BEACHD_TEST_POSTGRES, by
# default 127.0.0.1:5432 with trust auth and a database `test`. When none
# answers and we are root, installs Debian's postgresql and starts a
# throwaway cluster under a temp dir on that port (trust auth, a superuser
# role for the current user, database test). It keeps running after the
# tests; it lives only in /tmp.
set -euo pipefail

port="${BEACHD_PG_PORT:-5432}"
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }
if answers; then
	exit 0
fi
if [ "$(id -u)" != "0" ]; then
	echo "postgres.sh: no PostgreSQL on 127.0.0.1:$port and we are not root; PostgreSQL tests will skip (and fail under CI)" >&2
	exit 0
fi
bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
if [ -z "$(bindir)" ]; then
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends postgresql >/dev/null 2>&1; then
		apt-get update >/dev/null
		apt-get install -y --no-install-recommends postgresql >/dev/null
	fi
	# The package may start its own cluster; if it now answers, use it.
	sleep 1
	if answers; then
		runuser -u postgres -- psql -q -h 127.0.0.1 -p "$port" -c "CREATE ROLE $(id -un) SUPERUSER LOGIN" 2>/dev/null || true
		runuser -u postgres -- createdb -h 127.0.0.1 -p "$port" -O "$(id -un)" test 2>/dev/null || true
		exit 0
	fi
fi
bin="$(bindir)"
dir="$(mktemp -d /tmp/beachd-postgres.XXXXXX)"
chown postgres: "$dir"
runuser -u postgres -- "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
	-o "-h 127.0.0.1 -p $port -k $dir -c fsync=on -c max_connections=300" start >/dev/null
runuser -u postgres -- "$bin/psql" -q -h 127.0.0.1 -p "$port" -U postgres -c "CREATE ROLE $(id -un) SUPERUSER LOGIN"
runuser -u postgres -- "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres -O "$(id -un)" test
echo "postgres.sh: started a throwaway PostgreSQL on 127.0.0.1:$port (data and log in $dir)"
