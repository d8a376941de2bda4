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
	function yes(ok) { return ok ? "yes" : "NO" }
	END {
		printf "\n%-34s %8s  %-24s %s\n", "goal (medians of this run)", "value", "target", "met?"
		d = ratio(v["sec/op", "DecodeChatMessage/map"], v["sec/op", "DecodeChatMessage/sdk"])
		da = ratio(v["allocs/op", "DecodeChatMessage/sdk"], v["allocs/op", "DecodeChatMessage/map"])
		e = ratio(v["sec/op", "EncodeChatMessage/map"], v["sec/op", "EncodeChatMessage/sdk"])
		ea = ratio(v["allocs/op", "EncodeChatMessage/sdk"], v["allocs/op", "EncodeChatMessage/map"])
		s = ratio(v["sec/op", "DeltaStream/sdk"], v["sec/op", "DeltaStream/raw"])
		r64 = ratio(v["sec/op", "RoundTripWS/raw-64"], v["sec/op", "RoundTripWS/sdk-64"])
		r1 = ratio(v["sec/op", "RoundTripWS/raw-1"], v["sec/op", "RoundTripWS/sdk-1"])
		idle = v["B/channel", "IdleChannels"]
		f1 = v["MiB-peak", "CompletedFlood/ids-100000"]; f2 = v["MiB-peak", "CompletedFlood/ids-1000000"]
		fr = ratio(f2, f1)
		printf "%-34s %7sx  %-24s %s\n", "decode speed sdk vs map", d, ">= 2x", yes(d + 0 >= 2)
		printf "%-34s %8s  %-24s %s\n", "decode allocs sdk/map", da, "<= 0.33", yes(da != "n/a" && da + 0 <= 1 / 3)
		printf "%-34s %7sx  %-24s %s\n", "encode speed sdk vs map", e, ">= 2x", yes(e + 0 >= 2)
		printf "%-34s %8s  %-24s %s\n", "encode allocs sdk/map", ea, "<= 0.33", yes(ea != "n/a" && ea + 0 <= 1 / 3)
		printf "%-34s %7sx  %-24s %s\n", "delta stream time sdk/raw", s, "<= 2x", yes(s != "n/a" && s + 0 <= 2)
		printf "%-34s %7sx  %-24s %s\n", "round trip throughput sdk/raw @64", r64, ">= 0.7x", yes(r64 + 0 >= 0.7)
		printf "%-34s %7sx  %-24s %s\n", "round trip throughput sdk/raw @1", r1, "(no goal)", "-"
		printf "%-34s %8s  %-24s %s\n", "idle channel B/channel", idle, "<= 4096", yes(idle != "" && idle + 0 <= 4096)
		printf "%-34s %8s  %-24s %s\n", "completed store peak 1M/100k IDs", fr, "flat (<= 1.25)", yes(fr != "n/a" && fr + 0 <= 1.25)
	}' >&2
