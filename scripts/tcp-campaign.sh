#!/bin/sh
# tcp-campaign.sh: issue 13's campaign for the tcp conduit (docs/tcp.md,
# "Fourth campaign"). Every round is ONE run under the exclusive benchmark
# lock; in it, for pretend hosts (gexrun --pretend-hosts 2) and then for
# network-namespace hosts (gexrun --netns 2, root):
#   1. separate jobs: gexbench rawtcp (the floor), then am, put and get of
#      8 B, atomic, barrier and a 4 MiB flood, each -csv;
#   2. one gexbench tcplat job: the same rows and the raw floor interleaved
#      batch by batch in one job (the paired ratio).
# It prints each round's figures and their ratios to the same round's raw
# round trip / best raw stream, then the tcplat summaries.
#
#   go build -o /tmp/bin/ ./cmd/... && BIN=/tmp/bin scripts/tcp-campaign.sh
#
# Environment: BIN (the gexrun and gexbench binaries; default /tmp/tcp-bin),
# ROUNDS (default 5), OUT (the CSV files; default a new /tmp directory),
# LOCK (the lock file; default /tmp/bench.lock; "none" runs unlocked),
# KINDS (default "pretend netns"), TLARGS (extra tcplat flags), REPORT=1
# (print the report of the CSV files already in OUT, running nothing).
set -eu
BIN=${BIN:-/tmp/tcp-bin}
ROUNDS=${ROUNDS:-5}
OUT=${OUT:-$(mktemp -d /tmp/tcp-campaign.XXXXXX)}
LOCK=${LOCK:-/tmp/bench.lock}
KINDS=${KINDS:-pretend netns}
TLARGS=${TLARGS:-}
mkdir -p "$OUT"

# one_round R: every job of round R, into $OUT/R-KIND-NAME.csv.
one_round() {
	r=$1
	for kind in $KINDS; do
		case $kind in
		pretend) hosts="--pretend-hosts 2" ;;
		netns) hosts="--netns 2" ;;
		*) echo "tcp-campaign: unknown kind $kind" >&2; exit 2 ;;
		esac
		run() { # NAME ARGS...: one gexbench job, killed after 60 s
			name=$1; shift
			"$BIN/gexrun" --timeout 60s -n 2 $hosts "$BIN/gexbench" "$@" -csv >"$OUT/$r-$kind-$name.csv" 2>&1 ||
				echo "tcp-campaign: round $r $kind $name failed (see $OUT/$r-$kind-$name.csv)" >&2
		}
		run rawtcp rawtcp -samples 2 -iters 50000
		run am am -min 8 -max 8 -iters 50000
		run put put -min 8 -max 8 -iters 50000
		run get get -min 8 -max 8 -iters 50000
		run atomic atomic -iters 50000 -samples 2
		run barrier barrier -iters 50000
		run flood flood -min 4194304 -max 4194304 -samples 10
		run tcplat tcplat -rounds 1 -iters 20000 -batches 50 -samples 3 $TLARGS
	done
}

# value FILE BENCH SIZE METRIC: the CSV value (empty if absent).
value() {
	awk -F, -v b="$2" -v s="$3" -v m="$4" '$1==b && $3==s && $4==m {print $5; exit}' "$1" 2>/dev/null
}
# rawbest FILE: the best raw stream variant by its median sample (MiB/s).
rawbest() {
	awk -F, '$1 ~ /^raw-tcp-stream-/ && $4=="median" && $5>b {b=$5} END {print b+0}' "$1" 2>/dev/null
}

report_round() {
	r=$1
	for kind in $KINDS; do
		f() { echo "$OUT/$r-$kind-$1.csv"; }
		raw=$(value "$(f rawtcp)" raw-tcp-rtt 8 median)
		rawmin=$(value "$(f rawtcp)" raw-tcp-rtt 8 min)
		rs=$(rawbest "$(f rawtcp)")
		printf 'round %s %s, separate jobs: raw RT %s us (min %s), best raw stream %s MiB/s\n' "$r" "$kind" "$raw" "$rawmin" "$rs"
		for row in "am-Short am 0 AM-Short" "put put 8 put-8B" "get get 8 get-8B" "fadd-u64 atomic 8 FADD-U64" "barrier-Barrier barrier 0 barrier"; do
			set -- $row
			v=$(value "$(f "$2")" "$1" "$3" median)
			m=$(value "$(f "$2")" "$1" "$3" min)
			awk -v n="$4" -v v="$v" -v m="$m" -v raw="$raw" -v rawmin="$rawmin" 'BEGIN {
				if (v == "" || raw == "") { printf "  %-10s missing\n", n; exit }
				printf "  %-10s median %7.2f us  min %7.2f us  ratio %5.2f  min/min %5.2f\n", n, v, m, v/raw, m/rawmin }'
		done
		for d in put get; do
			v=$(value "$(f flood)" "flood-$d" 4194304 median)
			bst=$(value "$(f flood)" "flood-$d" 4194304 best)
			awk -v n="flood-$d" -v v="$v" -v b="$bst" -v rs="$rs" 'BEGIN {
				if (v == "" || rs == 0) { printf "  %-10s missing\n", n; exit }
				k = 1e6 / 1048576
				printf "  %-10s median %7.0f MiB/s  best %7.0f  ratio %5.2f\n", n, v*k, b*k, v*k/rs }'
		done
		printf 'round %s %s, tcplat (one job, interleaved): paired ratios\n' "$r" "$kind"
		awk -F, '$1 ~ /^tcplat-r1-/ && ($4=="ratio" || ($4=="median" && $1 ~ /raw/)) {
			sub(/^tcplat-r1-/, "", $1); printf "  %-12s %-7s %s %s\n", $1, $4, $5, $6 }' "$(f tcplat)"
	done
}

r=1
while [ "$r" -le "$ROUNDS" ]; do
	if [ "${REPORT:-}" = 1 ]; then
		: # the rounds ran before: report them
	elif [ "$LOCK" = none ]; then
		one_round "$r"
	else
		# One locked run per round (the machine's rule: keep it short).
		exec 9>>"$LOCK"
		flock -x 9
		one_round "$r"
		flock -u 9
		exec 9>&-
	fi
	report_round "$r"
	r=$((r + 1))
done
echo "CSV files: $OUT"
