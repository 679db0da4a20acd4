#!/bin/sh
# shm-campaign.sh: issue 15's rows (shared memory, C GASNet-EX smp against
# gexgo smp, ../shared/notes/perf-anchors.md) for one or more builds,
# interleaved round by round, every round ONE run under the exclusive
# benchmark lock with the floors (cache-line ping-pong, flag barrier, copy(),
# copy echo, the one-rank copy of 64 KiB and 1 MiB, and where a C compiler is
# installed the same copies with glibc's memcpy: scripts/cfloor.c)
# measured by the same jobs. Per row it prints, for each build, the range
# over the rounds of the figure the reference campaign used (gexbench -csv's
# avg for latencies, median for rates; the AM flood from examples/amping
# -oneway) and C's figure.
#
#   for v in old new; do (cd $v && go build -o /tmp/$v/ ./cmd/gexbench ./cmd/gexrun ./examples/amping); done
#   BINS="/tmp/old /tmp/new" ROUNDS=3 scripts/shm-campaign.sh
#
# Environment: BINS (directories holding gexrun, gexbench and amping;
# default /tmp/shm-bin), ROUNDS (default 3), OUT (the CSV files; default a
# new /tmp directory), LOCK (default /tmp/bench.lock; "none" runs unlocked).
set -eu
BINS=${BINS:-/tmp/shm-bin}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-$(mktemp -d /tmp/shm-campaign.XXXXXX)}
LOCK=${LOCK:-/tmp/bench.lock}
mkdir -p "$OUT"

# The C copy floors (scripts/cfloor.c, glibc's memcpy), where a C compiler is
# installed: the same copies with C's memcpy, in every build's round.
CFLOOR=""
if command -v cc >/dev/null 2>&1 && cc -O2 -o "$OUT/cfloor" "$(dirname "$0")/cfloor.c"; then
	CFLOOR="$OUT/cfloor"
fi

# one_round R: every job of round R for every build, into $OUT/R-B-NAME.csv.
one_round() {
	r=$1
	b=0
	for bin in $BINS; do
		b=$((b + 1))
		run() { # NAME RANKS ARGS...: one gexbench job, killed after 120 s
			name=$1 n=$2
			shift 2
			"$bin/gexrun" --timeout 120s -n "$n" "$bin/gexbench" "$@" -csv >"$OUT/$r-$b-$name.csv" 2>&1 ||
				echo "shm-campaign: round $r build $b $name failed (see $OUT/$r-$b-$name.csv)" >&2
		}
		run put 2 put -max 8
		run get 2 get -max 8
		run atomic 2 atomic
		run am 2 am -max 65536
		run barrier2 2 barrier
		run barrier4 4 barrier
		run reduce 2 reduce -max 8
		run bcast 2 bcast -max 1048576
		run vis 2 vis -min 8 -max 8
		run flood 2 flood -reuse -min 4096 -max 4194304
		"$bin/gexrun" --timeout 120s -n 2 "$bin/amping" -oneway >"$OUT/$r-$b-amping.txt" 2>&1 ||
			echo "shm-campaign: round $r build $b amping failed" >&2
		if [ -n "$CFLOOR" ]; then
			timeout 120 "$CFLOOR" >"$OUT/$r-$b-cfloor.csv" 2>&1 ||
				echo "shm-campaign: round $r build $b cfloor failed" >&2
		fi
	done
}

r=1
while [ "$r" -le "$ROUNDS" ]; do
	if [ "$LOCK" = none ]; then
		one_round "$r"
	else
		exec 9>"$LOCK"
		flock -x 9
		one_round "$r"
		exec 9>&-
	fi
	r=$((r + 1))
done

# pick R B FILE BENCH SIZE METRIC: the value of one CSV row.
pick() {
	awk -F, -v b="$4" -v s="$5" -v m="$6" '$1 == b && $3 == s && $4 == m { print $5; exit }' "$OUT/$1-$2-$3.csv" 2>/dev/null
}

# range B FILE BENCH SIZE METRIC SCALE: "min-max" over the rounds, times SCALE.
range() {
	b=$1 file=$2 bench=$3 size=$4 metric=$5 scale=$6
	r=1
	vals=""
	while [ "$r" -le "$ROUNDS" ]; do
		if [ "$file" = amping ]; then
			v=$(sed -n 's/.*handled at \([0-9.]*\) M\/s.*/\1/p' "$OUT/$r-$b-amping.txt" 2>/dev/null | head -1)
		else
			v=$(pick "$r" "$b" "$file" "$bench" "$size" "$metric")
		fi
		[ -n "$v" ] && vals="$vals $v"
		r=$((r + 1))
	done
	echo "$vals" | awk -v k="$scale" '{ if (NF == 0) { print "-"; exit } lo = hi = $1 * k
		for (i = 2; i <= NF; i++) { x = $i * k; if (x < lo) lo = x; if (x > hi) hi = x }
		printf "%.4g-%.4g\n", lo, hi }'
}

# row LABEL C FILE BENCH SIZE METRIC SCALE: one line of the summary.
row() {
	label=$1 cref=$2
	shift 2
	line=$(printf '| %s | %s |' "$label" "$cref")
	b=0
	for _ in $BINS; do
		b=$((b + 1))
		line="$line $(range "$b" "$@") |"
	done
	echo "$line"
}

echo "shm-campaign: $ROUNDS rounds of builds: $BINS (CSV in $OUT)"
printf '| row | C smp |'
for bin in $BINS; do printf ' %s |' "$bin"; done
echo
row "8 B PutBlocking avg (ns)" 3.6 put put 8 avg 1000
row "8 B GetBlocking avg (ns)" 2.8 get get 8 avg 1000
row "  copy() of 8 B avg (ns)" 2.5 put copy 8 avg 1000
row "U64 FADD latency avg (ns)" 4.9 atomic fadd-u64 8 avg 1000
row "  local atomic add avg (ns)" "~2" atomic xadd64 8 avg 1000
row "U64 FADD flood median (M ops/s)" 106 atomic fadd-flood-u64 8 median 1
row "AM Short RT avg (us)" 0.267 am am-Short 0 avg 1
row "AM Short one-way flood (M msg/s)" 14.5 amping - - - 1
row "  floor: one-way ring flood median (us per message)" "-" am floor-ringflood 8 median 1
row "AM Medium RT 8 B avg (us)" 0.284 am am-Medium 8 avg 1
row "AM Medium RT 4 KiB avg (us)" 0.548 am am-Medium 4096 avg 1
row "AM Medium RT 64 KiB avg (us)" 4.44 am am-Medium 65536 avg 1
row "AM Long RT 8 B avg (us)" 0.317 am am-Long 8 avg 1
row "AM Long RT 4 KiB avg (us)" 1.15 am am-Long 4096 avg 1
row "AM Long RT 64 KiB avg (us)" 16.1 am am-Long 65536 avg 1
row "  floor: cache-line ping-pong RT median (us)" "0.108-0.123" am floor-pingpong 8 median 1
row "  floor: two-line ping-pong RT median (us)" "-" am floor-twoline 8 median 1
row "  floor: copy echo 4 KiB median (us)" "-" am floor-copyecho 4096 median 1
row "  floor: copy echo 64 KiB median (us)" "-" am floor-copyecho 65536 median 1
row "  floor: copy() 64 KiB in one heap median (us)" "-" am floor-copy 65536 median 1
row "  floor: copy() 1 MiB (256 KiB pieces) in one heap median (us)" "23.3 (memcpy 45 GB/s)" am floor-copy 1048576 median 1
row "  C floor: memcpy echo 4 KiB median (us)" "-" cfloor cfloor-memcpyecho 4096 median 1
row "  C floor: memcpy echo 64 KiB median (us)" "-" cfloor cfloor-memcpyecho 65536 median 1
row "  C floor: memcpy 1 MiB in one heap median (us)" "23.3 (memcpy 45 GB/s)" cfloor cfloor-memcpy 1048576 median 1
row "barrier 2 ranks avg (us)" 0.219 barrier2 barrier-Barrier 0 avg 1
row "  floor: flag barrier median (us)" 0.062 barrier2 floor-flagbarrier 0 median 1
row "barrier 4 ranks avg (us)" 3.85 barrier4 barrier-Barrier 0 avg 1
row "  floor: process switch RT median (us)" "-" barrier4 floor-switch 0 median 1
row "8 B ReduceToAll avg (us)" 1.38 reduce reduce-ReduceToAll 8 avg 1
row "8 B Broadcast avg (us)" 7.5 bcast bcast-Broadcast 8 avg 1
row "1 MiB Broadcast heap avg (us)" 104 bcast bcast-Broadcast 1048576 avg 1
row "1 MiB Broadcast segment avg (us)" 104 bcast bcast-Broadcast-seg 1048576 avg 1
row "VIS strided put 8 B chunks median (MiB/s)" 2514 vis vis-strided-put 8 median 0.95367
row "PutNBI flood 4 KiB median (MiB/s)" 81904 flood flood-put 4096 median 0.95367
row "PutNBI flood 64 KiB median (MiB/s)" 53370 flood flood-put 65536 median 0.95367
row "PutNBI flood 4 MiB median (MiB/s)" 42072 flood flood-put 4194304 median 0.95367
