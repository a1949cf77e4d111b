package agent

import (
	"fmt"
	"strings"
)

// ShScript is the agent in POSIX sh, for images where the gatebridge
// binary cannot run: `sh -c "$ShScript" gatebridge-agent DIR`. It speaks
// the same layout, with one difference its hello announces ("sh": true):
// it runs req/<id>.sh, a script the host writes beside <id>.json (every
// word single-quoted), instead of parsing JSON. It needs setsid (util-linux
// or busybox) for the command's own process group, env, touch and mv;
// each command costs it a few process starts more than the Go agent.
//
// The main loop blocks reading the wake FIFO; on each wake it starts the
// new requests (each in a background runner), delivers new signal files,
// and forgets the commands whose request the host removed. A runner
// opens the command's stdin (when req/<id>.in exists) before it makes the
// output files, starts the command with setsid, watches the lease (EOF:
// the host is gone: kill the group), waits, kills what is left in the
// group and waits for it to go, then renames the exit status into place.
// The command gets none of the agent's other descriptors (not the wake
// FIFO's).
//
// The runner tells the main loop the command's process group in
// out/.<id>.pgid, once the command leads it. Every command can write
// out/ (it is the agent's user), so that record is a claim, not a fact:
// the main loop signals the group only when /proc/<pgid>/stat says it is
// a process group led by a child of the runner it started for that id
// (whose pid it keeps in a shell variable). A forged record (another
// command's group, the agent's own, one outside the agent) makes the
// signal go nowhere: the command only keeps itself from being signalled,
// which it can do anyway by leaving its group. Without a readable /proc
// no signal is sent; the lease and the runner's own kill at exit, which
// use the pid the runner holds, still end the command.
const ShScript = `D=$1; R=$D/req; O=$D/out
[ -d "$R" ] && [ -d "$O" ] || { echo "gatebridge agent: $D: no req/ and out/ (is gatebridge serving it?)" >&2; exit 1; }
command -v setsid >/dev/null 2>&1 || { echo "gatebridge agent: setsid not found in the image" >&2; exit 127; }
GB_SH=$(command -v sh) || exit 127; export GB_SH
trap '' PIPE
hello() {
  case $PATH in *[\"\\]*) p= ;; *) p=$PATH ;; esac
  printf '{"protocol":1,"pid":%d,"sh":true,"path":"%s"}\n' "$$" "$p" > "$O/.agent.json.tmp" &&
    mv -f "$O/.agent.json.tmp" "$O/agent.json"
}
hello || exit 1
( while kill -0 "$$" 2>/dev/null; do touch "$O/agent.json" 2>/dev/null || hello; sleep 1; done ) </dev/null >/dev/null 2>&1 &
pstat() {
  st=; { read -r st </proc/"$1"/stat; } 2>/dev/null
  set -- ${st##*") "}
  ps=${1-} pp=${2-} pg=${3-}
}
run() {
  id=$1
  if [ -p "$R/$id.in" ]; then exec 4<"$R/$id.in"; else exec 4</dev/null; fi
  rm -f "$O/$id.stdout" "$O/$id.stderr" "$O/$id.exit"
  : > "$O/$id.stdout"; : > "$O/$id.stderr"
  setsid "$GB_SH" "$R/$id.sh" <&4 4<&- 3>&- >>"$O/$id.stdout" 2>>"$O/$id.stderr" &
  c=$!
  exec 4<&-
  i=0
  while [ "$i" -lt 300 ]; do
    pstat "$c"
    [ "$pg" = "$c" ] || [ -z "$ps" ] || [ "$ps" = Z ] && break
    [ "$i" -lt 50 ] || sleep 0.01
    i=$((i+1))
  done
  echo "$c" > "$O/.$id.pgid"
  printf x >&3 2>/dev/null # a signal that came before the pgid was known
  w=
  if [ -p "$R/$id.lease" ]; then
    ( read -r _ <"$R/$id.lease"; kill -KILL -"$c" ) >/dev/null 2>&1 &
    w=$!
  fi
  wait "$c"; rc=$?
  kill -KILL -"$c" 2>/dev/null
  i=0; while kill -0 -"$c" 2>/dev/null && [ "$i" -lt 200 ]; do sleep 0.01; i=$((i+1)); done
  [ -n "$w" ] && kill -KILL "$w" 2>/dev/null
  echo "$rc" > "$O/.$id.exit.tmp" && mv -f "$O/.$id.exit.tmp" "$O/$id.exit"
}
exec 3<>"$R/wake"
seen=' '
while :; do
  for f in "$R"/*.sh; do
    [ -f "$f" ] || continue
    id=${f##*/}; id=${id%.sh}
    case $seen in *" $id "*) continue ;; esac
    seen="$seen$id "
    run "$id" </dev/null >/dev/null 2>&1 &
    eval "r_$id=\$!"
  done
  for f in "$R"/*.sig.*; do
    [ -f "$f" ] || continue
    b=${f##*/}; id=${b%%.sig.*}; n=${b##*.sig.}
    case $id$n in *[!0-9a-f]*) continue ;; esac
    eval "last=\${s_$id:-0}"
    [ "$n" -gt "$last" ] || continue
    [ -s "$O/.$id.pgid" ] || continue
    [ -e "$O/$id.exit" ] && continue
    read -r p <"$O/.$id.pgid"; read -r sig <"$f"
    case $p$sig in ''|*[!0-9]*) continue ;; esac
    eval "s_$id=\$n; r=\$r_$id"
    pstat "$p"
    [ -n "$r" ] && [ "$pp" = "$r" ] && [ "$pg" = "$p" ] || continue
    kill -"$sig" -"$p" 2>/dev/null
  done
  for id in $seen; do
    if [ ! -e "$R/$id.sh" ] && [ -e "$O/$id.exit" ]; then
      rm -f "$O/$id.stdout" "$O/$id.stderr" "$O/$id.exit" "$O/.$id.pgid"
      seen=$(printf '%s' "$seen" | sed "s/ $id / /")
      unset "s_$id" "r_$id"
    fi
  done
  read -r _ <&3 || sleep 1
done`

// shRequest is req/<id>.sh: cd to dir, then exec the command with exactly
// env, every word single-quoted. The command goes through the image's sh
// (the agent's $GB_SH, found before the session's PATH) so that a first
// word with '=' is not taken for an assignment, and it is looked up in
// the command's own PATH.
func shRequest(cmd Command) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "cd -- %s || exit 126\nexec env -i", shQuote(cmd.Dir))
	for _, kv := range cmd.Env {
		b.WriteString(" " + shQuote(kv))
	}
	b.WriteString(` "$GB_SH" -c 'exec "$@"' sh`)
	for _, a := range cmd.Argv {
		b.WriteString(" " + shQuote(a))
	}
	b.WriteString("\n")
	return []byte(b.String())
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
