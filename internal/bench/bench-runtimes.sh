#!/usr/bin/env bash
# The docker backend under each OCI runtime (runc, runsc = gVisor, and any
# other named in RUNTIMES), side by side in one run, and where the time
# goes. See docs/docker.md for results.
#
#   internal/bench/bench-runtimes.sh                # N=9 rounds, 100 gate calls
#   RUNTIMES="runc runsc" N=15 CALLS=200 internal/bench/bench-runtimes.sh
#
# Rows per runtime (medians in ms; per-command rows run each runtime once
# per round, round-robin, after one warm-up):
#   docker run      `docker run --rm --network none --runtime R IMG true`:
#                   the engine and the runtime alone
#   run -- true     `gatebridge run --sandbox docker --runtime R -- true`
#   gate call       `gb_echo hello` CALLS times in one sh loop, less the
#                   same loop empty, per call
#   process start   `/bin/true` CALLS times in the same way: a wrapper
#                   costs a few process starts inside, on the runtime's
#                   kernel
# Needs: docker engine with IMG present (make test-image, which has bash), each runtime
# registered (.ci/docker-runtime), bash >= 5 ($EPOCHREALTIME).
set -euo pipefail
cd "$(dirname "$0")/../.."

N=${N:-9}
GN=${GN:-5}
CALLS=${CALLS:-100}
IMG=${IMG:-gatebridge-test:latest}
RUNTIMES=${RUNTIMES:-runc runsc}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. internal/bench/bench-setup.sh # GB, ws (the current directory), IMG checked
export XDG_CACHE_HOME=$tmp/cache # measure each runtime afresh, once
have=$(docker info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}')
rts=()
for r in $RUNTIMES; do
	case " $have " in *" $r "*) rts+=("$r") ;; *) echo "bench-runtimes: the engine has no OCI runtime $r (it has: $have); skipped" >&2 ;; esac
done
[ ${#rts[@]} -gt 0 ] || exit 1

now() { echo "${EPOCHREALTIME/./}"; } # µs
ms() { awk -v u="$1" 'BEGIN { printf "%.1f", u / 1000 }'; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
timed() { local t0 t1; t0=$(now); "$@" >/dev/null 2>&1 || { echo "bench-runtimes: failed: $*" >&2; exit 1; }; t1=$(now); echo $((t1 - t0)); }

# Warm up each runtime (and measure it, once, as gatebridge does).
for r in "${rts[@]}"; do
	"$GB" run --sandbox docker --runtime "$r" -- true >/dev/null
	docker run --rm --network none --runtime "$r" "$IMG" true >/dev/null
done

declare -A drun grun
for _ in $(seq "$N"); do
	for r in "${rts[@]}"; do
		drun[$r]+="$(timed docker run --rm --network none --user 65534:65534 --runtime "$r" "$IMG" true) "
		grun[$r]+="$(timed "$GB" run --sandbox docker --runtime "$r" -- true) "
	done
done

# Per-call costs: T(loop of CALLS) - T(empty loop), inside one run.
loop() { # runtime, body
	local r=$1 body=$2
	"$GB" run --sandbox docker --runtime "$r" -- bash -c '
		t0=${EPOCHREALTIME/./}
		i=0; while [ $i -lt '"$CALLS"' ]; do '"$body"'; i=$((i+1)); done
		t1=${EPOCHREALTIME/./}
		echo $((t1 - t0))'
}
declare -A gate proc
for _ in $(seq "$GN"); do
	for r in "${rts[@]}"; do
		empty=$(loop "$r" ':')
		g=$(loop "$r" 'gb_echo hello >/dev/null')
		p=$(loop "$r" '/bin/true')
		gate[$r]+="$(( (g - empty) / CALLS )) "
		proc[$r]+="$(( (p - empty) / CALLS )) "
	done
done

printf '%-14s' "ms (median)"
for r in "${rts[@]}"; do printf '%12s' "$r"; done
[ ${#rts[@]} -eq 2 ] && printf '%12s' "${rts[1]}/${rts[0]}"
echo
row() { # label, array name
	local label=$1
	local -n arr=$2
	printf '%-14s' "$label"
	local vals=()
	for r in "${rts[@]}"; do
		v=$(tr ' ' '\n' <<<"${arr[$r]}" | grep . | median)
		vals+=("$v")
		printf '%12s' "$(ms "$v")"
	done
	[ ${#rts[@]} -eq 2 ] && awk -v a="${vals[0]}" -v b="${vals[1]}" 'BEGIN { printf "%11.1fx", b / a }'
	echo
}
row "docker run" drun
row "run -- true" grun
row "gate call" gate
row "process start" proc
echo "($N rounds per command, $GN x $CALLS calls; image $IMG; $(nproc) cores)"
