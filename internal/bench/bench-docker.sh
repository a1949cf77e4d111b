#!/usr/bin/env bash
# Per-command and per-gate-call overhead of gatebridge's sandboxes, through
# the CLI, side by side with the Docker CLI. See docs/docker.md and
# docs/bwrap.md for results.
#
#   internal/bench/bench-docker.sh              # N=15 rounds, 200 gate calls
#   N=30 CALLS=500 internal/bench/bench-docker.sh
#
# Per-command rows run each variant once per round, round-robin (so drift
# hits all alike), after one warm-up, and report the median and the
# 10th-90th percentile range in ms. Gate-call rows run `gb_echo hello`
# CALLS times in one `sh -c` loop and subtract the same command with an
# empty loop: (T(CALLS) - T(0)) / CALLS, median over GN rounds.
# Needs: docker engine with IMG present (make test-image), bwrap for the
# bwrap rows (skipped when unusable), bash >= 5 ($EPOCHREALTIME).
set -euo pipefail
cd "$(dirname "$0")/../.."

N=${N:-15}
GN=${GN:-7}
CALLS=${CALLS:-200}
IMG=${IMG:-gatebridge-test:latest}

tmp=$(mktemp -d)
name=bench-$$
ctr=
cleanup() {
	[ -n "${GB:-}" ] && "$GB" sandbox stop "$name" >/dev/null 2>&1 || true
	[ -n "$ctr" ] && docker rm -f "$ctr" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

. internal/bench/bench-setup.sh # GB, ws (the current directory), IMG checked

# Sessions in the default root (a tmpfs when one is writable), like the other rows.
"$GB" sandbox start --image "$IMG" "$name" >/dev/null 2>&1
# A plain container for `docker exec`, started like the CLI user would.
ctr=$(docker run -d --network none --user 65534:65534 "$IMG" sleep 2147483647)

bwrap_ok=1
"$GB" run --sandbox bwrap -- true >/dev/null 2>&1 || bwrap_ok=0

# one CMD...: prints the wall time of CMD in microseconds; fails loudly.
one() {
	local s e
	s=${EPOCHREALTIME/./}
	if ! "$@" >/dev/null 2>"$tmp/err"; then
		echo "failed: $*" >&2
		cat "$tmp/err" >&2
		exit 1
	fi
	e=${EPOCHREALTIME/./}
	echo $((e - s))
}

# stats FILE [DECIMALS]: "median p10-p90" in ms from microsecond samples.
stats() {
	sort -n "$1" | awk -v d="${2:-1}" '{a[NR]=$1} END {
		m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2
		lo = a[int((NR-1)*0.1)+1]; hi = a[int((NR-1)*0.9)+1]
		f = "%." d "f"
		printf f " " f "-" f "\n", m/1000, lo/1000, hi/1000 }'
}

declare -a labels cmds
add() { labels+=("$1"); cmds+=("$2"); }
add "docker run --rm IMG true (Docker CLI)" "docker run --rm --network none $IMG true"
add "gatebridge run --sandbox docker -- true" "$GB run --sandbox docker --image $IMG -- true"
add "docker exec CTR true (Docker CLI)" "docker exec $ctr true"
add "gatebridge run --reuse NAME -- true (agent)" "$GB run --reuse $name -- true"
add "gatebridge run --sandbox local -- true" "$GB run --sandbox local -- true"
if [ "$bwrap_ok" = 1 ]; then
	add "gatebridge run --sandbox bwrap -- true" "$GB run --sandbox bwrap -- true"
fi

for i in "${!cmds[@]}"; do
	one ${cmds[$i]} >/dev/null # warm-up
	: >"$tmp/t$i"
done
for ((r = 0; r < N; r++)); do
	for i in "${!cmds[@]}"; do
		one ${cmds[$i]} >>"$tmp/t$i"
	done
done

loop='i=0; while [ "$i" -lt "$1" ]; do gb_echo hello >/dev/null || exit 1; i=$((i+1)); done'
declare -a glabels gcmds
gadd() { glabels+=("$1"); gcmds+=("$2"); }
gadd "local" "$GB run --sandbox local --"
[ "$bwrap_ok" = 1 ] && gadd "bwrap" "$GB run --sandbox bwrap --"
gadd "docker (fresh container)" "$GB run --sandbox docker --image $IMG --"
gadd "docker (persistent, run --reuse)" "$GB run --reuse $name --"
for i in "${!gcmds[@]}"; do
	: >"$tmp/g$i"
done
for ((r = 0; r < GN; r++)); do
	for i in "${!gcmds[@]}"; do
		t0=$(one ${gcmds[$i]} sh -c "$loop" sh 0)
		tn=$(one ${gcmds[$i]} sh -c "$loop" sh "$CALLS")
		echo $(((tn - t0) / CALLS)) >>"$tmp/g$i"
	done
done

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -sr), $(nproc) CPUs, $(docker version -f 'docker {{.Server.Version}}' 2>/dev/null), $("$GB" version)"
echo
echo "Per command (N=$N, ms)"
echo
echo "| what | median | p10-p90 |"
echo "|---|---:|---:|"
for i in "${!cmds[@]}"; do
	read -r m r <<<"$(stats "$tmp/t$i")"
	echo "| \`${labels[$i]}\` | $m | $r |"
done
read -r mexec _ <<<"$(stats "$tmp/t2")"
read -r mreuse _ <<<"$(stats "$tmp/t3")"
echo
echo "run --reuse / docker exec (medians, same rounds): $(awk -v a="$mreuse" -v b="$mexec" 'BEGIN { printf "%.2fx", a / b }') (target <= 0.2x)"
echo
echo "Per gate call: $CALLS x \`gb_echo hello\` in one \`sh -c\` loop, (T($CALLS) - T(0)) / $CALLS, median of $GN (ms)"
echo
echo "| backend | per call | p10-p90 | vs local |"
echo "|---|---:|---:|---:|"
base=
for i in "${!gcmds[@]}"; do
	read -r m r <<<"$(stats "$tmp/g$i" 3)"
	[ -z "$base" ] && base=$m
	echo "| ${glabels[$i]} | $m | $r | $(awk -v a="$m" -v b="$base" 'BEGIN { printf "%.2fx", a / b }') |"
done
