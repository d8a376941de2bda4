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
# Environment: COUNT (rounds, >= 6 for benchstat's confidence intervals),
# BENCHTIME (per timed benchmark, default 1s), BENCHSTAT (the benchstat
# module to `go run`).
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
	sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" # the comment above is the usage
	exit 0
fi

cd "$(dirname "$0")/.."
COUNT=${COUNT:-6}
BENCHTIME=${BENCHTIME:-1s}
BENCHSTAT=${BENCHSTAT:-golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$PWD

go test -c -o "$tmp/imv2.test" .
go test -c -o "$tmp/dataplane.test" ./dataplane
go run "$BENCHSTAT" -h >/dev/null 2>&1 || true # fetch and build it before the timed part

# bench PKGDIR BINARY PATTERN BENCHTIME
bench() {
	(cd "$root/$1" && "$tmp/$2" -test.run '^$' -test.bench "$3" -test.benchmem \
		-test.benchtime "$4" -test.count 1)
}

for i in $(seq "$COUNT"); do
	echo "bench.sh: round $i of $COUNT" >&2
	{
		bench . imv2.test '^Benchmark(DecodeChatMessage|EncodeChatMessage|DeltaStream)$' "$BENCHTIME"
		bench . imv2.test '^BenchmarkCompletedFlood$' 1x
		bench dataplane dataplane.test '^BenchmarkRoundTripWS$' "$BENCHTIME"
		bench dataplane dataplane.test '^BenchmarkIdleChannels$' 1x
	} | tee -a "$tmp/bench.txt"
done

go run "$BENCHSTAT" "$tmp/bench.txt" >&2
go run "$BENCHSTAT" -format csv "$tmp/bench.txt" 2>/dev/null | awk -F, '
	# Sections of the CSV: a header row ",sec/op,CI" names the unit, then
	# one row per benchmark with its median. Names lose the -GOMAXPROCS.
	$2 ~ /^[a-zA-Z\/-]+$/ && $1 == "" { unit = $2; next }
	$1 != "" && $1 != "geomean" { name = $1; sub(/-[0-9]+$/, "", name); v[unit, name] = $2 }
	function ratio(a, b) { return (b == 0 || a == "" || b == "") ? "n/a" : sprintf("%.2f", a / b) }
	function cmp(what, unit, num, den) { return ratio(v[unit, num], v[unit, den]) }
	END {
		# Speed ratios from wall time (sec/op) and from CPU time (cpu-sec/op,
		# see internal/benchcpu): on a loaded machine the CPU ratio is the
		# steadier estimate of what an idle machine would show.
		printf "\n%-34s %8s %8s  %-16s %s\n", "goal (medians of this run)", "wall", "cpu", "target", "met? (wall)"
		d = cmp("", "sec/op", "DecodeChatMessage/map", "DecodeChatMessage/sdk")
		dc = cmp("", "cpu-sec/op", "DecodeChatMessage/map", "DecodeChatMessage/sdk")
		da = cmp("", "allocs/op", "DecodeChatMessage/sdk", "DecodeChatMessage/map")
		e = cmp("", "sec/op", "EncodeChatMessage/map", "EncodeChatMessage/sdk")
		ec = cmp("", "cpu-sec/op", "EncodeChatMessage/map", "EncodeChatMessage/sdk")
		ea = cmp("", "allocs/op", "EncodeChatMessage/sdk", "EncodeChatMessage/map")
		s = cmp("", "sec/op", "DeltaStream/sdk", "DeltaStream/raw")
		sc = cmp("", "cpu-sec/op", "DeltaStream/sdk", "DeltaStream/raw")
		r64 = cmp("", "sec/op", "RoundTripWS/raw-64", "RoundTripWS/sdk-64")
		r64c = cmp("", "cpu-sec/op", "RoundTripWS/raw-64", "RoundTripWS/sdk-64")
		r1 = cmp("", "sec/op", "RoundTripWS/raw-1", "RoundTripWS/sdk-1")
		r1c = cmp("", "cpu-sec/op", "RoundTripWS/raw-1", "RoundTripWS/sdk-1")
		idle = v["B/channel", "IdleChannels"]
		fr = cmp("", "MiB-peak", "CompletedFlood/ids-1000000", "CompletedFlood/ids-100000")
		row("decode speed sdk vs map (x)", d, dc, ">= 2", d != "n/a" && d + 0 >= 2)
		row("decode allocs sdk/map", da, "", "<= 0.33", da != "n/a" && da + 0 <= 1 / 3)
		row("encode speed sdk vs map (x)", e, ec, ">= 2", e != "n/a" && e + 0 >= 2)
		row("encode allocs sdk/map", ea, "", "<= 0.33", ea != "n/a" && ea + 0 <= 1 / 3)
		row("delta stream time sdk/raw (x)", s, sc, "<= 2", s != "n/a" && s + 0 <= 2)
		row("round trip thrpt sdk/raw @64 (x)", r64, r64c, ">= 0.7", r64 != "n/a" && r64 + 0 >= 0.7)
		printf "%-34s %8s %8s  %-16s %s\n", "round trip thrpt sdk/raw @1 (x)", r1, r1c, "(no goal)", "-"
		row("idle channel B/channel", idle, "", "<= 4096", idle != "" && idle + 0 <= 4096)
		row("completed peak 1M/100k IDs", fr, "", "flat: <= 1.25", fr != "n/a" && fr + 0 <= 1.25)
	}
	function row(what, wall, cpu, target, ok) {
		printf "%-34s %8s %8s  %-16s %s\n", what, wall, cpu, target, ok ? "yes" : "NO"
	}' >&2
