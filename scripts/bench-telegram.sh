#!/usr/bin/env bash
# Runs the Telegram Connector beside a Chat SDK bot on the same Bot API
# emulator and the same work, and prints the table of BENCHMARKS.md
# ("Telegram: beside the Chat SDK") as Markdown on stdout; progress and
# the bot's warnings go to stderr. Needs Node 20 and npm (the emulator and
# the bot); installs examples/telegram's node_modules with npm ci when
# absent. About a minute on the 2-core machine.
#
#   scripts/bench-telegram.sh                       # 100 chats × 3 messages
#   scripts/bench-telegram.sh -chats 10 -each 5     # flags of examples/telegram/bench
#
# scripts/bench.sh runs it (on stderr) where node is on PATH.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
	sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" # the comment above is the usage
	exit 0
fi
cd "$(dirname "$0")/../examples/telegram"
if [ ! -d node_modules/@chat-adapter/telegram ]; then
	npm ci --no-audit --no-fund >&2
fi
echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, node $(node --version), $(go version | cut -d' ' -f3)"
echo
go run ./bench "$@"
