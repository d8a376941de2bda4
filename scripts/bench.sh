#!/usr/bin/env bash
# Runs the performance benchmarks of BENCHMARKS.md, each SDK path next to
# its baseline in the same run, and summarises them.
#
#   scripts/bench.sh               # COUNT rounds (default 6)
#   COUNT=10 scripts/bench.sh > new.txt
#
# stdout is plain `go test -bench` output (feed it to benchstat); the
# benchstat table and the goal check go to stderr. The rounds are
# interleaved: round i runs every benchmark once, so an SDK path and its
# baseline always run seconds apart. On a shared machine, load that
# changes during the run then moves both, and the ratios stay comparable.
#
# Then, where node is on PATH, scripts/bench-telegram.sh: the Telegram
# Connector beside a Chat SDK bot, its table on stderr (about a minute).
#
# Environment: COUNT (rounds, >= 6 for benchstat's confidence intervals),
# BENCHTIME (per timed benchmark, default 1s), LATENCY_MSGS (messages per
# latency run, default 10000x: 2 s at 5,000 a second), STORE_MSGS
# (messages per store benchmark, default 5000x), BENCHSTAT (the
# benchstat module to `go run`). A round takes about 50 s on the 2-core
# machine.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
	sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" # the comment above is the usage
	exit 0
fi

cd "$(dirname "$0")/.."
COUNT=${COUNT:-6}
BENCHTIME=${BENCHTIME:-1s}
LATENCY_MSGS=${LATENCY_MSGS:-10000x} # messages per latency run, at 5,000 a second
STORE_MSGS=${STORE_MSGS:-5000x}      # messages per store benchmark, over all its channels
BENCHSTAT=${BENCHSTAT:-golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$PWD

go test -c -o "$tmp/imv2.test" .
go test -c -o "$tmp/dataplane.test" ./dataplane
(cd pgstore && go test -c -o "$tmp/pgstore.test" .) # its own module; starts its own PostgreSQL
go run "$BENCHSTAT" -h >/dev/null 2>&1 || true # fetch and build it before the timed part

# bench PKGDIR BINARY PATTERN BENCHTIME
bench() {
	(cd "$root/$1" && "$tmp/$2" -test.run '^$' -test.bench "$3" -test.benchmem \
		-test.benchtime "$4" -test.count 1)
}

for i in $(seq "$COUNT"); do
	echo "bench.sh: round $i of $COUNT" >&2
	{
		bench . imv2.test '^Benchmark(DecodeChatMessage|EncodeChatMessage|DeltaStream|DeltaCost)$' "$BENCHTIME"
		bench . imv2.test '^BenchmarkCompletedFlood$' 1x
		bench dataplane dataplane.test '^Benchmark(RoundTripWS|RoundTripWSOneCore|ChannelsWS)$' "$BENCHTIME"
		bench dataplane dataplane.test '^BenchmarkLatencyWS$' "$LATENCY_MSGS"
		bench dataplane dataplane.test '^BenchmarkIdleChannels$' 1x
		bench pgstore pgstore.test '^BenchmarkConnectorMessages$' "$STORE_MSGS"
		bench pgstore pgstore.test '^BenchmarkReplicas$' "$STORE_MSGS"
	} | tee -a "$tmp/bench.txt"
done

go run "$BENCHSTAT" "$tmp/bench.txt" >&2
# go test names a benchmark NAME-P when it runs with GOMAXPROCS P > 1, and
# NAME alone at 1 (where a name such as RoundTripWS/sdk-64 must keep -64):
# P is read off a name that ends in no number of its own.
procs=$(awk '$1 ~ /^BenchmarkDeltaStream\/sdk(-[0-9]+)?$/ { n = $1; print sub(/^BenchmarkDeltaStream\/sdk-/, "", n) ? n : 1; exit }' "$tmp/bench.txt")
go run "$BENCHSTAT" -format csv "$tmp/bench.txt" 2>/dev/null | awk -F, -v procs="$procs" '
	# Sections of the CSV: a header row ",sec/op,CI" names the unit, then
	# one row per benchmark with its median. Names lose the -GOMAXPROCS.
	$2 ~ /^[a-zA-Z0-9.\/-]+$/ && $1 == "" { unit = $2; next }
	$1 != "" && $1 != "geomean" { name = $1; if (procs != 1) sub("-" procs "$", "", name); v[unit, name] = $2 }
	function fmt3(x) { return (x == "") ? "n/a" : sprintf("%.3f", x) }
	function ratio(a, b) { return (b == 0 || a == "" || b == "") ? "n/a" : sprintf("%.2f", a / b) }
	function ratio3(a, b) { return (b == 0 || a == "" || b == "") ? "n/a" : sprintf("%.3f", a / b) }
	function cmp(what, unit, num, den) { return ratio(v[unit, num], v[unit, den]) }
	function ge(x, t) { return x != "n/a" && x + 0 >= t }
	function le(x, t) { return x != "n/a" && x + 0 <= t }
	END {
		# Speed ratios from wall time (sec/op) and from CPU time (cpu-sec/op,
		# see internal/benchcpu): on a loaded machine the CPU ratio is the
		# steadier estimate of what an idle machine would show.
		printf "\n%-38s %8s %8s  %-16s %s\n", "goal (medians of this run)", "wall", "cpu", "target", "met? (wall)"
		d = cmp("", "sec/op", "DecodeChatMessage/map", "DecodeChatMessage/sdk")
		dc = cmp("", "cpu-sec/op", "DecodeChatMessage/map", "DecodeChatMessage/sdk")
		dn = v["allocs/op", "DecodeChatMessage/sdk"]
		e = cmp("", "sec/op", "EncodeChatMessage/map", "EncodeChatMessage/sdk")
		ec = cmp("", "cpu-sec/op", "EncodeChatMessage/map", "EncodeChatMessage/sdk")
		ea = cmp("", "allocs/op", "EncodeChatMessage/sdk", "EncodeChatMessage/map")
		s = cmp("", "sec/op", "DeltaStream/sdk", "DeltaStream/raw")
		sc = cmp("", "cpu-sec/op", "DeltaStream/sdk", "DeltaStream/raw")
		# ns/delta is tidied to sec/delta by benchstat.
		pd = cmp("", "sec/delta", "DeltaCost/deltas-10000", "DeltaCost/deltas-100")
		if (pd == "n/a") pd = cmp("", "ns/delta", "DeltaCost/deltas-10000", "DeltaCost/deltas-100")
		r64 = cmp("", "sec/op", "RoundTripWS/raw-64", "RoundTripWS/sdk-64")
		r64c = cmp("", "cpu-sec/op", "RoundTripWS/raw-64", "RoundTripWS/sdk-64")
		r64n = v["allocs/op", "RoundTripWS/sdk-64"]
		r1 = cmp("", "sec/op", "RoundTripWS/raw-1", "RoundTripWS/sdk-1")
		r1c = cmp("", "cpu-sec/op", "RoundTripWS/raw-1", "RoundTripWS/sdk-1")
		o64 = cmp("", "sec/op", "RoundTripWSOneCore/raw-64", "RoundTripWSOneCore/sdk-64")
		cpu64 = cmp("", "cpu-sec/op", "RoundTripWS/sdk-64", "RoundTripWS/raw-64")
		o1 = cmp("", "sec/op", "RoundTripWSOneCore/raw-1", "RoundTripWSOneCore/sdk-1")
		w64 = fmt3(v["writes/op", "RoundTripWS/sdk-64"])
		w64r = fmt3(v["writes/op", "RoundTripWS/raw-64"])
		rd64 = fmt3(v["reads/op", "RoundTripWS/sdk-64"])
		rd64r = fmt3(v["reads/op", "RoundTripWS/raw-64"])
		chs = cmp("", "sec/op", "ChannelsWS/ch-1000", "ChannelsWS/ch-1")
		chc = cmp("", "cpu-sec/op", "ChannelsWS/ch-1000", "ChannelsWS/ch-1")
		l50 = cmp("", "p50-sec", "LatencyWS/sdk", "LatencyWS/raw")
		l99 = cmp("", "p99-sec", "LatencyWS/sdk", "LatencyWS/raw")
		l999 = cmp("", "p99.9-sec", "LatencyWS/sdk", "LatencyWS/raw")
		p99 = v["p99-sec", "LatencyWS/sdk"]
		idle = v["B/channel", "IdleChannels/channels-100000"]
		idleg = cmp("", "B/channel", "IdleChannels/channels-100000", "IdleChannels/channels-10000")
		fr = cmp("", "MiB-peak", "CompletedFlood/ids-1000000", "CompletedFlood/ids-100000")
		row("decode speed sdk vs map (x)", d, dc, ">= 3.5", ge(d, 3.5))
		row("decode allocs sdk", dn, "", "<= 9", dn != "" && dn + 0 <= 9)
		row("encode speed sdk vs map (x)", e, ec, ">= 2", ge(e, 2))
		row("encode allocs sdk/map", ea, "", "<= 0.33", le(ea, 1 / 3))
		row("delta stream time sdk/raw (x)", s, sc, "<= 2", le(s, 2))
		row("per-delta cost 10,000/100 (x)", pd, "", "<= 1.2", le(pd, 1.2))
		# Round trips: wall-time ratios on two cores measure the
		# scheduler hand-offs (BENCHMARKS.md), so the guards are the
		# one-core ratio and the CPU per message.
		printf "%-38s %8s %8s  %-16s %s\n", "round trip thrpt sdk/raw @64 (x)", r64, r64c, "(no goal)", "-"
		printf "%-38s %8s %8s  %-16s %s\n", "round trip thrpt sdk/raw @1 (x)", r1, r1c, "(no goal)", "-"
		row("round trip allocs sdk @64", r64n, "", "<= 15", r64n != "" && r64n + 0 <= 15)
		row("one core: thrpt sdk/raw @64 (x)", o64, "", ">= 0.6", ge(o64, 0.6))
		row("round trip cpu/msg sdk/raw @64 (x)", cpu64, "", "<= 1.25", le(cpu64, 1.25))
		printf "%-38s %8s %8s  %-16s %s\n", "one core: thrpt sdk/raw @1 (x)", o1, "", "(no goal)", "-"
		printf "%-38s %8s %8s  %-16s %s\n", "write(2) per msg @64 sdk / raw", w64, w64r, "(no goal)", "-"
		printf "%-38s %8s %8s  %-16s %s\n", "read(2) per msg @64 sdk / raw", rd64, rd64r, "(no goal)", "-"
		printf "%-38s %8s %8s  %-16s %s\n", "1,000 vs 1 channel time/msg (x)", chs, chc, "(no goal)", "-"
		printf "%-38s %8s %8s  %-16s %s\n", "latency sdk/raw p50 (x)", l50, "", "(no goal)", "-"
		printf "%-38s %8s %8s  %-16s %s\n", "latency sdk/raw p99.9 (x)", l999, "", "(no goal)", "-"
		row("latency sdk/raw p99 (x), reported", l99, "", "reported", p99 != "")
		row("idle channel B/channel @100,000", idle, "", "<= 2048", idle != "" && idle + 0 <= 2048)
		printf "%-38s %8s %8s  %-16s %s\n", "idle channel 100,000 vs 10,000 (x)", idleg, "", "(no goal)", "-"
		row("completed peak 1M/100k IDs", fr, "", "flat: <= 1.25", le(fr, 1.25))
		# Stores (BenchmarkConnectorMessages of pgstore): messages per
		# second, a durable store over memory, the same channels.
		for (d = 0; d < 2; d++) {
			dir = d ? "receive" : "send"
			for (c = 0; c < 3; c++) {
				chs = c == 0 ? "ch-1" : (c == 1 ? "ch-100" : "ch-1000")
				m = "ConnectorMessages/" dir "/memory/" chs
				bo = ratio3(v["msgs/s", "ConnectorMessages/" dir "/bolt/" chs], v["msgs/s", m])
				pg = ratio3(v["msgs/s", "ConnectorMessages/" dir "/postgres/" chs], v["msgs/s", m])
				if (dir == "receive" && chs == "ch-100") {
					row("stores: " dir " bolt/memory @" chs, bo, "", ">= 0.2", ge(bo, 0.2))
					row("stores: " dir " postgres/memory @" chs, pg, "", ">= 0.1", ge(pg, 0.1))
				} else {
					printf "%-38s %8s %8s  %-16s %s\n", "stores: " dir " bolt/memory @" chs, bo, "", "(no goal)", "-"
					printf "%-38s %8s %8s  %-16s %s\n", "stores: " dir " postgres/memory @" chs, pg, "", "(no goal)", "-"
				}
			}
		}
		# Replicas (BenchmarkReplicas of pgstore): msgs/s of two Connector
		# processes on one database over one process, 100 channels, both
		# sides child processes; cpu: the CPU per message (children and
		# server) of one process over that of two. The two processes and
		# the server share the 2 cores, so this is not scaling: a wall
		# ratio near the cpu ratio is the CPU of smaller group commits, one
		# below it waiting between replicas.
		for (d = 1; d >= 0; d--) {
			dir = d ? "receive" : "send"
			one = "Replicas/" dir "/postgres/ch-100/one-process"
			two = "Replicas/" dir "/postgres/ch-100/two-processes"
			rw = ratio(v["msgs/s", two], v["msgs/s", one])
			rc = "n/a"
			if (v["cpu-sec/op", one] != "" && v["pg-cpu-sec/op", one] != "" && v["cpu-sec/op", two] != "" && v["pg-cpu-sec/op", two] != "")
				rc = ratio(v["cpu-sec/op", one] + v["pg-cpu-sec/op", one], v["cpu-sec/op", two] + v["pg-cpu-sec/op", two])
			printf "%-38s %8s %8s  %-16s %s\n", "two processes / one @100 ch, " dir, rw, rc, "(no goal)", "-"
		}
	}
	function row(what, wall, cpu, target, ok) {
		printf "%-38s %8s %8s  %-16s %s\n", what, wall, cpu, target, ok ? "yes" : "NO"
	}' >&2

# The Telegram Connector beside the Chat SDK (BENCHMARKS.md): it needs Node.
if command -v node >/dev/null; then
	scripts/bench-telegram.sh >&2
else
	echo "bench.sh: no node on PATH: the Telegram benchmark (scripts/bench-telegram.sh) is not run" >&2
fi
