#!/usr/bin/env bash
# Run a throwaway Dendrite homeserver on loopback for trying the Matrix
# Connector (examples/matrix) by hand. The same install the e2e test uses:
#
#   GOBIN=$CACHE go install github.com/matrix-org/dendrite/cmd/{dendrite,generate-keys,generate-config,create-account}@v0.13.8
#
# Usage: scripts/dendrite.sh [port]   (default 8008; data in a temp dir)
# Creates users alice/alice-password and bot/bot-password, then runs in the
# foreground until Ctrl-C.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
	sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" # the comment above is the usage
	exit 0
fi

VERSION=v0.13.8
PORT=${1:-8008}
CACHE=${IMV2_DENDRITE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/imv2-dendrite/$VERSION}
MOD=github.com/matrix-org/dendrite/cmd

if [[ ! -x $CACHE/dendrite || ! -x $CACHE/generate-keys || ! -x $CACHE/generate-config || ! -x $CACHE/create-account ]]; then
	echo "building Dendrite $VERSION into $CACHE (about 1.5 min)…" >&2
	mkdir -p "$CACHE"
	(cd "${TMPDIR:-/tmp}" && GOBIN=$CACHE CGO_ENABLED=1 go install \
		"$MOD/dendrite@$VERSION" "$MOD/generate-keys@$VERSION" \
		"$MOD/generate-config@$VERSION" "$MOD/create-account@$VERSION")
fi

DIR=$(mktemp -d -t dendrite.XXXXXX)
cd "$DIR"
"$CACHE/generate-keys" --private-key "$DIR/matrix_key.pem" >/dev/null
"$CACHE/generate-config" -ci -dir "$DIR" |
	sed -e 's/disable_federation: false/disable_federation: true/' \
		-e "s#private_key: matrix_key.pem#private_key: $DIR/matrix_key.pem#" \
		-e 's/level: trace/level: warn/' >dendrite.yaml

"$CACHE/dendrite" -config dendrite.yaml -http-bind-address "127.0.0.1:$PORT" -really-enable-open-registration &
PID=$!
trap 'kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; rm -rf "$DIR"' EXIT INT TERM

for _ in $(seq 1 300); do
	curl -sf "http://127.0.0.1:$PORT/_matrix/client/versions" >/dev/null && break
	sleep 0.1
done
for u in alice bot; do
	"$CACHE/create-account" -config dendrite.yaml -url "http://127.0.0.1:$PORT" -username "$u" -password "$u-password" 2>&1 | sed 's/^/  /'
done
cat <<EOF

Dendrite $VERSION is running: http://127.0.0.1:$PORT (server name "localhost", PID $PID)
Users: @alice:localhost / alice-password, @bot:localhost / bot-password
Data: $DIR (removed on exit). Ctrl-C to stop.
EOF
wait "$PID"
