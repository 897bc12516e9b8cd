#!/usr/bin/env bash
# A plain shell master (bash), driven by the conformance suite, written the way docs/shell.md
# teaches ("Without any master: the files by hand"): files written with
# printf into a dot-file and renamed, seq reserved by exclusive create
# (set -C), results found by exact name, replies read from ctl/ack/,
# liveness by the heartbeat counter, lease renewed by a background loop.
# Only bash, coreutils, grep and (optionally) util-linux flock.
#
# Reads one step per line on stdin ("op key=value ..."; *_b64 values are
# base64) and prints one JSON outcome per line. The session is $1. Results
# are reported by file (result_file): the driver reads them as cat would.
set -u
shopt -s extglob nullglob
S=$1
lease_pid=""
# Every file this master creates is group-shared (0660), as if chmod'ed.
umask 007

# The wait loops poll; each fork there costs a loaded or virtualised host
# (user-mode Linux: the NFS suite) tens of milliseconds, so they use bash
# built-ins only: the clock from $EPOCHREALTIME, JSON fields read with
# `read`, and naps taken by `read -t` on a pipe nothing writes to.
now_ms() { local t=${EPOCHREALTIME/./}; now=$((t / 1000)); }  # sets now
# The pipe is a FIFO made once and unlinked at once (process substitution
# needs /dev/fd, which a minimal system may not have); failing that, sleep.
nap_fifo=${TMPDIR:-/tmp}/.sp-nap.$$.$RANDOM
if mkfifo -m 600 "$nap_fifo" 2>/dev/null && exec {nap_fd}<>"$nap_fifo"; then
  nap() { read -r -t "$1" -u "$nap_fd" _; }
else
  nap() { sleep "$1"; }
fi 2>/dev/null
rm -f "$nap_fifo"
# revalidate: opening a directory makes an NFS client drop cached "absent"
# lookups, so a file another host just created is seen at once.
revalidate() { { : <"$1"; } 2>/dev/null; }
json_str() {
  local s=$1
  s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\r'/\\r}; s=${s//$'\t'/\\t}
  printf '"%s"' "$s"
}
# jload FILE: J[key] is each top-level string or number field of a JSON
# file the runner wrote (one "key": value per line; the first of a key).
# Not a regular file (absent, a FIFO): J is empty, and nothing blocks.
declare -A J
jload() {
  local l re='^  "([A-Za-z0-9_]+)": *"?([^",]*)"?,?$'
  J=()
  [ -f "$1" ] || return 0
  while IFS= read -r l; do
    [[ $l =~ $re ]] && ! [[ -v J[${BASH_REMATCH[1]}] ]] && J[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
  done 2>/dev/null <"$1"
}
field() { jload "$2"; printf -v "$1" '%s' "${J[$3]:-}"; }  # field VAR FILE KEY
# json_num VAR WHAT VALUE [int] [MIN] [MAX]: VALUE written as a JSON
# number into VAR (.5 -> 0.5, 5. -> 5, +3 -> 3), or a usage outcome (exit
# 2) naming WHAT and return 1, before anything is written (PROTOCOL.md
# 19.1, "Numbers"): only decimal digits with an optional sign, fraction and
# exponent (no Inf, NaN, hex, leading zeros or words), a real no larger
# than 1e308 (a double holds 1.8e308), an integer (int) of at most 18 digits, within
# MIN..MAX (integers; a real's MIN may only be 0: no sign).
json_num() {
  local -n _out=$1
  local what=$2 v=$3 type=${4:-real} min=${5:-} max=${6:-} why="" sign int frac exp
  if [ "$type" = int ]; then
    if ! [[ $v =~ ^([+-]?)(0|[1-9][0-9]{0,17})$ ]]; then why="not a decimal integer"
    else
      _out=${BASH_REMATCH[2]}; [ "${BASH_REMATCH[1]}" = - ] && [ "$_out" != 0 ] && _out=-$_out
      if [ -n "$min" ] && ((_out < min)); then why="must be at least $min"
      elif [ -n "$max" ] && ((_out > max)); then why="must be at most $max"; fi
    fi
  elif ! [[ $v =~ ^([+-]?)(0|[1-9][0-9]*|)(\.([0-9]*))?([eE]([+-]?[0-9]{1,4}))?$ ]] ||
       [ -z "${BASH_REMATCH[2]}${BASH_REMATCH[4]}" ]; then why="not a decimal number"
  else
    sign=${BASH_REMATCH[1]} int=${BASH_REMATCH[2]:-0} frac=${BASH_REMATCH[4]} exp=${BASH_REMATCH[6]}
    _out=$int; [ -n "$frac" ] && _out+=.$frac; [ -n "$exp" ] && _out+=e${exp#+}
    [ "$sign" = - ] && _out=-$_out
    local e=$((10#${exp#[+-]}0 / 10)); [ "${exp:0:1}" = - ] && e=$((-e))  # 1e308 and above: refused
    if (( (int == 0 ? -1 : ${#int} - 1) + e > 307 )); then why="too large for a double"
    elif [ "$min" = 0 ] && [ "$sign" = - ]; then why="must be at least 0"; fi
  fi
  [ -z "$why" ] && return 0
  printf '{"outcome":"usage","exit":2,"message":%s}\n' "$(json_str "$what \"$v\": $why")"
  return 1
}
atomic_write() { # atomic_write PATH CONTENT
  # Parameter expansion, not dirname/basename: on a loaded host every fork
  # counts, and the lease loop writes through here every ttl/3.
  local tmp="${1%/*}/.${1##*/}.$$.tmp"
  printf '%s' "$2" >"$tmp" && mv -f "$tmp" "$1"
}
alloc_seq() { # PROTOCOL.md section 5: exclusive create of seq/<n>; sets seq
  local n="" f h=""
  read -r n 2>/dev/null <"$S/seq/hint"
  if ! [[ $n =~ ^[0-9]{1,18}$ ]]; then
    n=0; for f in "$S"/seq/+([0-9]); do f=${f##*/}; ((10#$f > n)) && n=$((10#$f)); done
  fi
  n=$((10#$n))
  while :; do
    n=$((n + 1))
    printf -v f '%s/seq/%010d' "$S" "$n"
    if { set -C; : >"$f"; } 2>/dev/null; then set +C; break; fi
    set +C
  done
  read -r h 2>/dev/null <"$S/seq/hint"
  if ! [[ $h =~ ^[0-9]+$ ]] || ((10#$h < n)); then atomic_write "$S/seq/hint" "$n"$'\n'; fi
  seq=$n
}
find_cmd() { find_in "$S" "$1" queue inflight result; }  # find_cmd ID: the command's file name (find_in)
# pruned_below NAME ID: result NAME, found by a lookup of cmd_id ID, is the
# duplicate_cmd_id refusal of a retry whose original (a lower seq) the
# retention removed: the cmd_id names the original, which the pruned index
# holds. Read without a fork (read -d ''), and only for such a refusal.
pruned_below() {
  local r="" s1 s2
  [ -f "$S/result/$1" ] && [ ! -L "$S/result/$1" ] || return 1
  IFS= read -r -d '' r <"$S/result/$1" 2>/dev/null
  [[ $r =~ \"code\":[[:space:]]*\"duplicate_cmd_id\" && $r =~ \"pruned\":[[:space:]]*true ]] || return 1
  pruned_of "" "$2" || return 1
  s1=${p_name#cmd_}; s1=${s1%%_*}; s2=${1#cmd_}; s2=${s2%%_*}
  ((10#$s1 < 10#$s2))
}
# pruned_of NAME ID: the pruned index (PROTOCOL.md section 23: log/pruned.log
# then log/pruned.log.1 — a rotation renames the first to the second, so a
# line is in the one read first or, moved in between, in the second — one
# "<name> <status> <end_ts>" per line) holds the command file NAME, or (NAME
# empty) the cmd_id ID at its lowest seq; sets p_status and p_name. grep
# forks, so a wait asks only once the command is nowhere.
pruned_of() {
  local f n st ts s best="" bs="" pat="_$2.json "
  [ -n "$1" ] && pat="$1 "
  for f in "$S/log/pruned.log" "$S/log/pruned.log.1"; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue  # Never followed.
    while read -r n st ts; do
      [ -n "$ts" ] || continue
      if [ -n "$1" ]; then [ "$n" = "$1" ] || continue
      else [[ $n == cmd_+([0-9])_"$2".json ]] || continue; fi
      s=${n#cmd_}; s=${s%%_*}
      if [ -z "$best" ] || [ -n "$1" ] || ((10#$s < 10#$bs)); then best=$n bs=$s p_status=$st; fi
    done <<<"$(grep -F -- "$pat" "$f" 2>/dev/null)"  # Not <(...): no /dev/fd in the NFS guest.
  done
  p_name=$best
  [ -n "$best" ]
}
out_pruned() { out_code pruned 8 "{\"cmd_id\":$(json_str "$1"),\"status\":$(json_str "$p_status")}"; }  # out_pruned ID
# done_or_gone NAME: a result is there, or the command is nowhere (queued,
# running, finished) and the pruned index holds it (gone=1) or a withdraw
# took it back (gone=2: withdrawn/, it never runs).
gone=0
done_or_gone() {
  has_result "$1" && return 0
  [ -e "$S/queue/$1" ] || [ -e "$S/inflight/$1" ] && return 1
  revalidate "$S/queue"; revalidate "$S/inflight"
  [ -e "$S/queue/$1" ] || [ -e "$S/inflight/$1" ] || has_result "$1" && return 1
  pruned_of "$1" "" && ! has_result "$1" && gone=1 && return 0
  revalidate "$S/withdrawn"
  [ -e "$S/withdrawn/$1" ] && ! has_result "$1" && gone=2 && return 0
  return 1
}
# session_ok: the session exists (its parent and itself revalidated first:
# on NFS a "no such directory" seen before the runner made it is cached).
network=""
session_ok() {
  revalidate "${S%/*}"; revalidate "$S"
  [ -d "$S/queue" ] || return 1
  if [ -z "$network" ]; then
    case $(stat -f -c %T "$S" 2>/dev/null) in nfs*|cifs|smb*|fuse*|9p|ceph|lustre|gpfs|afs|coda|"") network=1 ;; *) network=0 ;; esac
  fi
}

# Liveness (PROTOCOL.md section 8): dead at once if stopped or (local
# filesystem) the runner's flock is free; else alive while the heartbeat
# counter moves within 2 x interval + 250 ms of our clock. A counter that
# stands still longer is late, not dead: requests and waits give up only
# once no live runner has been seen for the grace. A runner that stopped on
# purpose (phase stopped and, on a local filesystem, its lock free; on NFS
# state.json alone) does not come back by itself: a wait for a result,
# output or a reply ends after a second then (stopped_ends; not ready).
hb_counter=""; hb_at=0; hb_moved=0; hb_iv=1000
lock_free() { [ "${network:-1}" = 0 ] && command -v flock >/dev/null && [ -f "$S/state/runner.lock" ] &&
  flock -n -s 9 2>/dev/null 9<"$S/state/runner.lock"; }  # fd 9 closes, and our shared lock with it
look() { # sets alive (1/0), definite (1/0), late (1/0), stopped (1/0: on purpose), why
  revalidate "$S/state"
  local st="$S/state/state.json" hb="$S/state/heartbeat.json" phase c iv now
  alive=0; definite=1; late=0; stopped=0
  if [ ! -f "$st" ] && [ ! -f "$hb" ]; then why="no runner has written state yet"; return; fi
  field phase "$st" phase
  jload "$hb"
  if [ "$phase" = stopped ] || [ "${J[phase]:-}" = stopped ]; then
    why="the runner stopped"
    if [ "${network:-1}" = 1 ] || [ ! -f "$S/state/runner.lock" ] || lock_free; then stopped=1; fi
    return
  fi
  if lock_free; then why="the runner's lock is free"; return; fi
  # The session_id with the counter: a new runner counts from the start again.
  c="${J[session_id]:-}:${J[counter]:-}"; iv=${J[interval_ms]:-}; [[ $iv =~ ^[0-9]+$ ]] || iv=1000
  ((iv < 100)) && iv=100
  hb_iv=$iv
  now_ms
  if [ "$hb_at" = 0 ] || [ "$c" != "$hb_counter" ]; then
    [ "$hb_at" != 0 ] && hb_moved=1 || hb_moved=0
    hb_counter=$c; hb_at=$now
  fi
  local age=$((now - hb_at)) window=$((2 * iv + 250))
  if [ "$hb_moved" = 1 ] && ((age <= window)); then alive=1; definite=0; why="heartbeat counter moved"; return; fi
  definite=0
  if ((age > window)); then late=1; why="heartbeat counter has not moved for ${age}ms"; return; fi
  why="heartbeat counter not seen moving yet"
}
# set_grace: the one grace of requests and waits (PROTOCOL.md section 8,
# "Giving up"): wait_for_runner_ms (none: 10 s or ten heartbeat intervals,
# whichever is longer), never under one liveness window.
set_grace() {
  local w=$((2 * hb_iv + 250))
  grace=${k_wait_for_runner_ms:-0}
  ((grace <= 0)) && grace=$((10 * hb_iv > 10000 ? 10 * hb_iv : 10000))
  ((grace < w)) && grace=$w
}
alive_now() { # like look, but watches until it can decide (a status: late is not alive)
  look
  while [ "$alive" = 0 ] && [ "$definite" = 0 ] && [ "$late" = 0 ]; do nap 0.05; look; done
}
await_alive() { # a request's check before it writes: 0 once alive; 1 when dead at once or none seen for the grace
  local start now
  now_ms; start=$now
  while :; do
    look
    [ "$alive" = 1 ] && return 0
    set_grace; gave_grace=$grace
    [ "$definite" = 1 ] && return 1
    now_ms
    ((now - start > grace)) && return 1
    nap 0.1
  done
}
# wait_until CMD...: poll CMD (1 ms doubling to 100 ms) until it succeeds;
# exit 3 on the step's wait_timeout_ms, 5 when no live runner was seen for
# the grace (set_grace), or for a second when the runner stopped on purpose
# (unless stopped_ends=0: ready).
stopped_ends=1
wait_until() {
  local start deadline=-1 grace last delay=1 next=0 t now d
  now_ms; start=$now; last=$start
  [ -n "${k_wait_timeout_ms:-}" ] && deadline=$((start + k_wait_timeout_ms))
  while ! "$@"; do
    now_ms; t=$now
    if ((deadline >= 0 && t >= deadline)); then return 3; fi
    if ((t >= next)); then
      next=$((t + 100)); look
      set_grace
      if [ "$alive" = 1 ]; then last=$t
      elif [ "$stopped_ends" = 1 ] && [ "$stopped" = 1 ] && ((t - last >= (grace < 1000 ? grace : 1000))); then
        gave_grace=$grace; return 5
      elif ((t - last > grace)); then gave_grace=$grace; return 5; fi
    fi
    printf -v d '0.%03d' "$delay"; nap "$d"
    delay=$((delay * 2)); ((delay > 100)) && delay=100
  done
  return 0
}

out_result() { # out_result NAME: the outcome of a command with a result
  local st code
  jload "$S/result/$1"; st=${J[status]:-}
  case $st in ok) code=0 ;; error) code=1 ;; timeout) code=3 ;; cancelled) code=4 ;; *) code=10 ;; esac
  printf '{"outcome":"%s","exit":%d,"cmd_id":"%s","result_file":"result/%s"}\n' "$st" "$code" "${J[cmd_id]:-}" "$1"
}
out_code() { # out_code CODE EXIT [CONTEXT-JSON]: an error's context beside its code, then $extra
  if [ -n "${3:-}" ]; then printf '{"outcome":"%s","exit":%d,"context":%s%s}\n' "$1" "$2" "$3" "${extra:-}"
  else printf '{"outcome":"%s","exit":%d%s}\n' "$1" "$2" "${extra:-}"; fi
}
# not_alive_ctx [EXTRA]: the context of runner_not_alive (why, the grace)
not_alive_ctx() { printf '{"reason":%s,"grace_ms":%d%s}' "$(json_str "$why")" "${gave_grace:-0}" "${1:-}"; }
# has_result: a result is there, or something that is not one (a FIFO, a
# symlink) stands where it goes; do_wait then reports an I/O error.
has_result() { revalidate "$S/result"; [ -e "$S/result/$1" ] || [ -L "$S/result/$1" ]; }
bad_result() { [ -L "$S/result/$1" ] || [ ! -f "$S/result/$1" ]; }
has_reply() { revalidate "$S/ctl/ack"; [ -f "$S/ctl/ack/$1" ]; }

# out_unknown ID: unknown_cmd_id (6), saying so when a withdraw took it back
# (withdrawn/: it never runs, PROTOCOL.md section 19).
out_unknown() {
  local w
  if w=$(find_in "$S" "$1" withdrawn); then
    printf '{"outcome":"unknown_cmd_id","exit":6,"context":{"cmd_id":%s},"message":%s}\n' "$(json_str "$1")" \
      "$(json_str "$1 was withdrawn (withdrawn/$w): it never runs and gets no result")"
  else out_code unknown_cmd_id 6 "{\"cmd_id\":$(json_str "$1")}"; fi
}
do_wait() { # do_wait NAME
  local rc id=${1#cmd_*_}; id=${id%.json}
  gone=0
  wait_until done_or_gone "$1"; rc=$?
  case $rc in 0) if [ "$gone" = 1 ]; then out_pruned "$id"; elif [ "$gone" = 2 ]; then
         printf '{"outcome":"unknown_cmd_id","exit":6,"context":{"cmd_id":%s},"message":%s}\n' "$(json_str "$id")" \
           "$(json_str "$id was withdrawn (withdrawn/$1): it never runs and gets no result")"; elif bad_result "$1"; then out_code io_error 10; else out_result "$1"; fi ;;
    3) out_code wait_timeout 3 "{\"cmd_id\":\"$id\"}" ;;
    *) # A command still queued stays queued: say so (as every master does).
       revalidate "$S/queue"
       if [ -f "$S/queue/$1" ]; then
         printf '{"outcome":"runner_not_alive","exit":5,"context":%s,"message":%s}\n' "$(not_alive_ctx ",\"cmd_id\":\"$id\"")" \
           "$(json_str "waiting for $id: runner not alive: $why; $id stays queued: a runner started later runs it unless it is withdrawn")"
       else out_code runner_not_alive 5 "$(not_alive_ctx ",\"cmd_id\":\"$id\"")"; fi ;;
  esac
}

# stats_bytes FILE: sets total to the result's stats.bytes (0 if absent);
# the runner writes JSON indented by two spaces, so stats' members are at four.
stats_bytes() {
  local l in=0 re='^    "bytes": *([0-9]+),?$'
  total=0
  while IFS= read -r l; do
    case $l in '  "stats": {') in=1 ;; '  }'*) in=0 ;; esac
    [ $in = 1 ] && [[ $l =~ $re ]] && total=${BASH_REMATCH[1]}
  done 2>/dev/null <"$1"
}
# range OFFSET LENGTH [FILE]: bytes OFFSET.. of FILE (or stdin), LENGTH of
# them (< 0: to the end), as base64. A FILE is opened without following a
# symlink and without blocking (a FIFO reads as empty).
range() {
  local count=() in=()
  (($2 >= 0)) && count=("count=$2")
  [ $# -gt 2 ] && in=("if=$3" iflag=nofollow,nonblock,skip_bytes,count_bytes,fullblock) || in=(iflag=skip_bytes,count_bytes,fullblock)
  dd "${in[@]}" bs=65536 skip="$1" "${count[@]}" status=none 2>/dev/null | base64 -w0
}
out_io() { printf '{"outcome":"io_error","exit":10,"message":%s}\n' "$(json_str "$1")"; }  # out_io MESSAGE
# do_output: a byte range of a command's output, as the other masters
# (PROTOCOL.md section 7): once the command has a result, never fewer bytes
# than its stats.bytes says the file held. A file missing or cut short is an
# I/O error, unless the result carries a whole copy (output_inline); before
# the result, what the file holds so far.
do_output() {
  local name off=${k_offset:-0} len=${k_length:--1} rel f n want b64 inline="" total=0
  ((len <= 0)) && len=-1  # To the end, as every master.
  if ((off < 0)); then
    printf '{"outcome":"usage","exit":2,"message":%s}\n' "$(json_str "output offset $off: must not be negative")"; return
  fi
  if ! name=$(find_cmd "$k_id"); then
    if pruned_of "" "$k_id"; then out_pruned "$k_id"; else out_unknown "$k_id"; fi
    return
  fi
  f="$S/output/${name%.json}.out"
  if [ -e "$S/result/$name" ] || [ -L "$S/result/$name" ]; then
    if bad_result "$name"; then out_io "result/$name is not a regular file"; return; fi
    jload "$S/result/$name"; rel=${J[output_path]:-}; inline=${J[output_inline]:-}
    if [ -z "$rel" ]; then printf '{"outcome":"ok","exit":0,"output_b64":""}\n'; return; fi  # It never ran.
    case $rel in output/+([!/]).out) f="$S/$rel" ;; *) out_io "result/$name has no usable output_path: $rel"; return ;; esac
    stats_bytes "$S/result/$name"
    want=$total; ((len >= 0 && off + len < total)) && want=$((off + len))
  else want=0; fi
  revalidate "$S/output"
  rel=${f#"$S/"}
  if [ -L "$f" ] || { [ -e "$f" ] && [ ! -f "$f" ]; }; then out_io "$rel is not a regular file"; return; fi  # Never followed, never opened.
  if [ ! -e "$f" ]; then
    if [ -n "${inline:-}" ] && [ "$(printf '%s' "$inline" | base64 -d 2>/dev/null | wc -c)" = "$total" ]; then
      b64=$(printf '%s' "$inline" | base64 -d | range "$off" "$len")
    elif ((want > off)); then out_io "$rel is gone, and the result of $k_id says it held $total bytes"; return
    else b64=""; fi
  else
    # Counted from what was read, not from a stat: an NFS client may hold
    # the size of a file another host has since cut short.
    b64=$(range "$off" "$len" "$f")
    n=$((${#b64} / 4 * 3))
    case $b64 in *==) n=$((n - 2)) ;; *=) n=$((n - 1)) ;; esac
    if ((off + n < want)); then out_io "$rel holds $((off + n)) bytes, but the result of $k_id says $total"; return; fi
  fi
  printf '{"outcome":"ok","exit":0,"output_b64":"%s"}\n' "$b64"
}

# A command is named by one rule (PROTOCOL.md section 19, "Naming a
# command"): a command file's name, or a path ending in one, is exactly that
# file; a cmd_id the file with the lowest seq in all the directories
# (listed in the order a command moves: a retry queued under an answered
# cmd_id does not hide the command that ran).
sfield() { grep -o "\"$2\" *: *\"[^\"]*\"" "$1" 2>/dev/null | head -1 | sed 's/.*: *"\(.*\)"$/\1/'; }
find_in() { # find_in DIR ID SUBDIR...: prints the command file's name
  local d=$1 id=$2 sub f s best="" bs bsub; shift 2
  for sub; do
    revalidate "$d/$sub"
    for f in "$d/$sub"/cmd_+([0-9])_"$id".json; do
      f=${f##*/}; s=${f#cmd_}; s=${s%%_*}
      if [ -z "$best" ] || ((10#$s < 10#$bs)); then best=$f bs=$s bsub=$sub; fi
    done
  done
  [ -n "$best" ] || return 1
  [ "$bsub" = result ] && [ "$d" = "$S" ] && pruned_below "$best" "$id" && return 1  # The caller then finds it pruned.
  echo "$best"
}
# take_back DIR FROM NAME: rename DIR/queue/FROM to DIR/withdrawn/NAME; mv
# (rename(2)) fails when a runner or a pool mover renamed it first, so
# exactly one of them wins.
take_back() {
  revalidate "$1/queue"
  [ -e "$1/queue/$2" ] || return 1
  [ -d "$1/withdrawn" ] || mkdir "$1/withdrawn" 2>/dev/null
  [ -e "$1/withdrawn/$3" ] && return 1
  mv -T -- "$1/queue/$2" "$1/withdrawn/$3" 2>/dev/null
}
# do_withdraw: take the command back where it is now, following a pool's
# forward/ records (the mover's staged copy first, then the published file)
# and waiting while a mover holds it in moved/ without a record. Then: a
# a result means finished, a claim (without one) running, withdrawn/
# withdrawn before;
# nowhere is unknown: it never runs.
do_withdraw() {
  session_ok || { out_code session_missing 5; return; }
  local ref=$k_id base name id ctx d found dir cur to stage tos hops=0 t0 moving claimed now
  base=${ref##*/}
  if [[ $base =~ ^cmd_[0-9]{1,18}_([A-Za-z0-9._-]{1,128})\.json$ ]]; then name=$base id=${BASH_REMATCH[1]}
  elif [ "$base" != "$ref" ] || ! [[ $ref =~ ^[A-Za-z0-9._-]{1,128}$ ]]; then out_code usage 2; return
  else name="" id=$ref; fi
  ctx="{\"cmd_id\":$(json_str "$id")}"
  if [ -z "$name" ]; then
    if ! name=$(find_in "$S" "$id" queue moved forward inflight result); then
      if find_in "$S" "$id" withdrawn >/dev/null; then out_code already_withdrawn 7 "$ctx"
      elif pruned_of "" "$id"; then out_pruned "$id"; else out_code unknown_cmd_id 6 "$ctx"; fi
      return
    fi
  else
    found=""
    for d in queue moved forward inflight result; do revalidate "$S/$d"; [ -e "$S/$d/$name" ] && { found=1; break; }; done
    if [ -z "$found" ]; then
      revalidate "$S/withdrawn"
      if [ -e "$S/withdrawn/$name" ]; then out_code already_withdrawn 7 "$ctx"
      elif pruned_of "$name" "$id"; then out_pruned "$id"; else out_code unknown_cmd_id 6 "$ctx"; fi
      return
    fi
  fi
  now_ms; dir=$S cur=$name t0=$now
  while :; do
    if take_back "$dir" "$cur" "$cur"; then out_code withdrawn 0; return; fi
    revalidate "$dir/moved"; moving=""; [ -e "$dir/moved/$cur" ] && moving=1
    revalidate "$dir/forward"
    if [ -f "$dir/forward/$cur" ]; then
      to=$(sfield "$dir/forward/$cur" to_name); stage=$(sfield "$dir/forward/$cur" stage); tos=$(sfield "$dir/forward/$cur" to_session)
      if [[ $to != cmd_+([0-9])_"$id".json ]] || [ -z "$stage" ] || [[ $stage == */* ]] || [ -z "$tos" ] || ((hops >= 16)); then
        out_code io_error 10 "$ctx"; return
      fi
      dir=$dir/$tos
      if take_back "$dir" "$stage" "$to"; then out_code withdrawn 0; return; fi
      cur=$to hops=$((hops + 1))
      continue
    fi
    now_ms
    if [ -n "$moving" ] && ((now - t0 < 5000)); then nap 0.01; continue; fi
    # inflight/ before result/: the runner renames the result in, then
    # moves the claim out, so a claim seen beside a result is finished,
    # and no order of the two looks misses both.
    revalidate "$dir/inflight"; claimed=""; [ -e "$dir/inflight/$cur" ] && claimed=1
    revalidate "$dir/result"; revalidate "$dir/withdrawn"
    if [ -n "$moving" ]; then out_code not_queued 7 "$ctx"
    elif [ -f "$dir/result/$cur" ]; then out_code already_finished 7 "$ctx"
    elif [ -n "$claimed" ]; then out_code not_queued 7 "$ctx"
    elif [ -e "$dir/withdrawn/$cur" ]; then out_code already_withdrawn 7 "$ctx"
    else out_code unknown_cmd_id 6 "$ctx"; fi
    return
  done
}

do_submit() { # do_submit RUN(0/1)
  session_ok || { out_code session_missing 5; return; }
  local id payload seq name json cursor now timeout="" budget=""
  # Numbers first: a value the file cannot hold writes nothing, not even a seq.
  [ -n "${k_timeout_ms:-}" ] && timeout=$(printf '%d.%03d' $((k_timeout_ms / 1000)) $((k_timeout_ms % 1000)))
  [ -n "${k_timeout_s+x}" ] && { json_num timeout timeout_s "$k_timeout_s" real 0 || return; }
  [ -n "${k_max_output_bytes+x}" ] && { json_num budget max_output_bytes "$k_max_output_bytes" int 0 || return; }
  case ${k_cancel_policy-} in ''|ctrl_c|terminate_tool|terminate_session) ;; *) out_code usage 2; return ;; esac
  now_ms; id=${k_id:-sh-$now-$$-$RANDOM}
  payload=$(base64 -d <<<"$k_payload_b64")
  alloc_seq
  cursor=$(spool_size)  # before the command is queued: its output comes after it
  json="{\"protocol_version\":1,\"cmd_id\":\"$id\",\"seq\":$seq,\"kind\":\"tcl\",\"payload\":$(json_str "$payload")"
  [ -n "$timeout" ] && json+=",\"timeout_s\":$timeout"
  [ -n "${k_cancel_policy:-}" ] && json+=",\"cancel_policy\":\"$k_cancel_policy\""
  [ -n "${k_trace_id:-}" ] && json+=",\"trace_id\":$(json_str "$k_trace_id")"
  [ -n "$budget" ] && json+=",\"max_output_bytes\":$budget"
  if [ -n "${k_labels:-}" ]; then # labels=k=v,k2=v2
    local kv members="" pairs
    IFS=, read -r -a pairs <<<"$k_labels"
    for kv in "${pairs[@]}"; do members+=",$(json_str "${kv%%=*}"):$(json_str "${kv#*=}")"; done
    json+=",\"labels\":{${members#,}}"
  fi
  json+=",\"submitter\":\"shell\"}"
  printf -v name 'cmd_%010d_%s.json' "$seq" "$id"
  atomic_write "$S/queue/$name" "$json"
  if [ "$1" = 1 ]; then do_wait "$name"; else
    printf '{"outcome":"queued","exit":0,"cmd_id":"%s","reply":{"resume_cursor":%d}}\n' "$id" "$cursor"; fi
}

# fresh_heartbeat SEQ: 0 when the runner looks alive from one look, without
# waiting for its counter (PROTOCOL.md section 19, "Control requests"):
# state.json names a session and is not stopped, the heartbeat is that
# session's, heartbeat.json's mtime is within the liveness window of the
# mtime of seq reservation SEQ (just made: both are the session
# filesystem's clock), and on a local filesystem the runner's lock is held.
fresh_heartbeat() {
  local st="$S/state/state.json" hb="$S/state/heartbeat.json" ref f sid phase t_hb t_ref iv
  printf -v ref '%s/seq/%010d' "$S" "$1"
  revalidate "$S/state"
  field phase "$st" phase; field sid "$st" session_id
  [ -n "$sid" ] && [ "$phase" != stopped ] || return 1
  jload "$hb"
  [ "${J[phase]:-}" != stopped ] && [ "${J[session_id]:-}" = "$sid" ] || return 1
  for f in "$hb" "$ref"; do [ -f "$f" ] && [ ! -L "$f" ] || return 1; done
  t_hb=$(date -r "$hb" +%s%3N 2>/dev/null) && t_ref=$(date -r "$ref" +%s%3N 2>/dev/null) || return 1
  iv=${J[interval_ms]:-}; [[ $iv =~ ^[0-9]+$ ]] || iv=1000; ((iv < 100)) && iv=100
  ((t_ref - t_hb <= 2 * iv + 250)) || return 1
  [ "${network:-1}" = 1 ] && return 0
  [ -f "$S/state/runner.lock" ] && command -v flock >/dev/null && ! lock_free
}

do_request() { # do_request OP MEMBERS: mailbox request, then its reply's outcome
  session_ok || { out_code session_missing 5; return 1; }
  local seq id name sid json rc now
  alloc_seq
  # At once when the heartbeat is fresh, else by watching its counter.
  fresh_heartbeat "$seq" || await_alive || { out_code runner_not_alive 5 "$(not_alive_ctx)"; return 1; }  # no request written
  now_ms; id="sh-$now-$$-$RANDOM"
  printf -v name 'req_%010d_%s.json' "$seq" "$id"
  field sid "$S/state/state.json" session_id
  json="{\"protocol_version\":1,\"req_id\":\"$id\",\"seq\":$seq,\"op\":\"$1\",\"session_id\":\"$sid\"$2}"
  atomic_write "$S/ctl/$name" "$json"
  wait_until has_reply "$name"; rc=$?
  if [ "$rc" != 0 ]; then
    rm -f "$S/ctl/$name"  # withdraw it unless the runner took it
    if [ ! -f "$S/ctl/ack/$name" ]; then
      if [ "$rc" = 3 ]; then out_code wait_timeout 3; else out_code runner_not_alive 5 "$(not_alive_ctx)"; fi
      return 1
    fi
  fi
  field reply_outcome "$S/ctl/ack/$name" outcome; reply_name=$name
  return 0
}
# ctx_members FILE: the members of the reply's "context" object as the
# runner wrote them (one per line, four spaces in), joined by commas.
ctx_members() { sed -n '/^  "context": {/,/^  }/{/^    "/{s/^    //;s/,$//;p;};}' "$1" 2>/dev/null | paste -sd, -; }
reply_ctx() { # the context of a refused request: the reply's own, then op, req_id, outcome, cmd_id, cmd_state of its reply
  local f="$S/ctl/ack/$reply_name" k v out=""
  v=$(ctx_members "$f")  # The keys below come after it: a decoder keeps the last of a key.
  [ -n "$v" ] && out=",$v"
  jload "$f"
  for k in op req_id outcome cmd_id cmd_state; do
    v=${J[$k]:-}; [ -n "$v" ] && out+=",\"$k\":$(json_str "$v")"
  done
  printf '{%s}' "${out#,}"
}
out_reply() { # the outcome of a reply, with its exit code (PROTOCOL.md section 19)
  case $reply_outcome in
    cancelled_running|cancelled_queued|accepted|delivered) out_code "$reply_outcome" 0 ;;
    not_found) out_code unknown_cmd_id 6 "$(reply_ctx)" ;;
    already_finished|idle|not_running) out_code "$reply_outcome" 7 ;;
    expect_timeout) out_code expect_timeout 3 "$(reply_ctx)" ;;
    stale) out_code stale 5 ;;
    refused_echo) out_code refused_echo 10 ;;
    *) out_code rejected 10 ;;
  esac
}
# out_send: a send, signal or resize reply's outcome with its counts and,
# when refused, the named command's state.
out_send() {
  local k v extra=""
  jload "$S/ctl/ack/$reply_name"
  for k in bytes match_start match_end cmd_state; do
    v=${J[$k]:-}
    [ -z "$v" ] && continue
    if [[ $v =~ ^[0-9]+$ ]]; then extra+=",\"$k\":$v"; else extra+=",\"$k\":$(json_str "$v")"; fi
  done
  out_reply
}

# A send is a mailbox request like the others: the bytes base64 in
# data_b64 (the text and a newline, as master send types them).
do_send() {
  local b64 members
  b64=$( { printf '%s' "$k_text_b64" | base64 -d; [ "${k_no_newline:-0}" = 1 ] || printf '\n'; } | base64 -w0)
  members=",\"cmd_id\":\"$k_id\",\"data_b64\":\"$b64\""
  [ "${k_secret:-0}" = 1 ] && members+=',"secret":true'
  [ -n "${k_expect_b64:-}" ] && members+=",\"expect\":$(json_str "$(printf '%s' "$k_expect_b64" | base64 -d)")"
  [ -n "${k_expect_timeout+x}" ] && k_expect_timeout_ms=$k_expect_timeout  # A raw value: milliseconds.
  if [ -n "${k_expect_timeout_ms+x}" ]; then
    json_num k_expect_timeout_ms expect_timeout_ms "$k_expect_timeout_ms" int 0 604800000 || return
    members+=",\"expect_timeout_ms\":$k_expect_timeout_ms"
  fi
  do_request send "$members" && out_send
}
do_signal() { do_request signal ",\"cmd_id\":\"$k_id\",\"signal\":\"$k_sig\"" && out_send; }
do_resize() {
  local cols rows
  json_num cols cols "$k_cols" int 1 10000 && json_num rows rows "$k_rows" int 1 10000 || return
  do_request resize ",\"cols\":$cols,\"rows\":$rows" && out_send
}

do_cancel() {
  local members=',"scope":"current"' id=${k_id:-} base
  if [ -n "$id" ]; then # A command file's name names its command too (PROTOCOL.md 19).
    base=${id##*/}
    if [[ $base =~ ^cmd_[0-9]{1,18}_([A-Za-z0-9._-]{1,128})\.json$ ]]; then id=${BASH_REMATCH[1]}
    elif [ "$base" != "$id" ] || ! [[ $id =~ ^[A-Za-z0-9._-]{1,128}$ ]]; then out_code usage 2; return; fi
    members=",\"scope\":\"cmd_id\",\"cmd_id\":\"$id\""
  fi
  do_request cancel "$members" && out_reply
}

stopped() { look; [ "$alive" = 0 ] && [ "$definite" = 1 ]; }
do_stop() {
  local mode=graceful
  [ "${k_force:-0}" = 1 ] && mode=force
  do_request stop ",\"mode\":\"$mode\"" || return
  if [ "$reply_outcome" = accepted ] && [ "${k_wait:-0}" = 1 ]; then
    wait_until stopped  # 0: stopped; 5: no live runner seen for the grace, as good as stopped
    [ $? = 3 ] && { out_code wait_timeout 3; return; }
  fi
  out_reply
}

do_status() {
  session_ok || { out_code session_missing 5; return; }
  local phase serve=false outcome=not_alive code=5 cursor
  cursor=$(spool_size)
  alive_now
  field phase "$S/state/state.json" phase
  if [ "$alive" = 1 ]; then
    outcome=cannot_serve
    case $phase in error|stopping) ;; *) serve=true; outcome=ok; code=0 ;; esac
  fi
  printf '{"outcome":"%s","exit":%d,"alive":%s,"phase":"%s","can_serve":%s,"reply":{"resume_cursor":%d}}\n' \
    "$outcome" "$code" "$([ "$alive" = 1 ] && echo true || echo false)" "$phase" "$serve" "$cursor"
}

write_lease() { # write_lease TTL_MS COUNTER
  atomic_write "$S/state/lease.json" "{\"protocol_version\":1,\"lease_id\":\"shell-$$\",\"ttl_ms\":$1,\"counter\":$2,\"owner\":\"shell\"}"
}
do_lease() {
  session_ok || { out_code session_missing 5; return; }
  [ -n "${k_ttl+x}" ] && k_ttl_ms=$k_ttl  # A raw ttl: this master's unit, milliseconds.
  json_num k_ttl_ms ttl_ms "$k_ttl_ms" int 1 || return
  write_lease "$k_ttl_ms" 1 || { out_code io_error 10; return; }
  if [ "${k_keep:-0}" = 1 ]; then
    local every; every=$(printf '%d.%03d' $((k_ttl_ms / 3000)) $((k_ttl_ms / 3 % 1000)))
    ( n=1; while sleep "$every"; do n=$((n + 1)); write_lease "$k_ttl_ms" "$n" || echo "lease: renewal failed" >&2; done ) &
    lease_pid=$!
  fi
  out_code ok 0
}
do_lease_stop() {
  [ -n "$lease_pid" ] && kill "$lease_pid" 2>/dev/null && wait "$lease_pid" 2>/dev/null
  lease_pid=""
  # A renewal killed between its write and its rename leaves its temp file.
  rm -f "$S/state/.lease.json.$$.tmp"
  out_code ok 0
}

spool_size() { stat -c %s "$S/log/session.out" 2>/dev/null || echo 0; }  # a resume_cursor: output from now on
match_at() { # match_at FROM RE: sets m_off and m_text for the first match at or after FROM
  local hit
  hit=$(tail -c +"$(($1 + 1))" "$S/log/session.out" 2>/dev/null | grep -a -b -o -m1 -E -e "$2" | head -1)
  [ -n "$hit" ] || return 1
  m_off=${hit%%:*}; m_text=${hit#*:}
}
# spool_cut: sets cut to state.json's retention.spool_cut (0: nothing cut),
# below which the spool's bytes are holes that read as zeros (PROTOCOL.md
# section 23).
spool_cut() {
  local l re='^ *"spool_cut": *([0-9]+),?$' f=$S/state/state.json
  cut=0
  [ -f "$f" ] && [ ! -L "$f" ] || return 0  # Never followed.
  while IFS= read -r l; do [[ $l =~ $re ]] && { cut=${BASH_REMATCH[1]}; return 0; }; done 2>/dev/null <"$f"
}
do_waitfor() {
  session_ok || { out_code session_missing 5; return; }
  local re from=${k_from:-0} rc start end cursor cut
  re=$(base64 -d <<<"$k_re_b64")
  spool_cut; ((cut > from)) && from=$cut  # An old cursor starts at the cut.
  wait_until match_at "$from" "$re"; rc=$?
  case $rc in
    0) start=$((from + m_off)); end=$((start + $(printf '%s' "$m_text" | wc -c)))
       printf '{"outcome":"matched","exit":0,"start":%d,"end":%d,"resume_cursor":%d,"match_b64":"%s",' \
         "$start" "$end" "$end" "$(printf '%s' "$m_text" | base64 -w0)"
       printf '"reply":{"matched":true,"match_text":%s,"match_span":{"start":%d,"end":%d},"resume_cursor":%d}}\n' \
         "$(json_str "$m_text")" "$start" "$end" "$end" ;;
    3) cursor=$(spool_size)
       printf '{"outcome":"wait_timeout","exit":3,"resume_cursor":%d,"reply":{"matched":false,"resume_cursor":%d},"context":{"resume_cursor":%d}}\n' "$cursor" "$cursor" "$cursor" ;;
    *) cursor=$(spool_size)
       printf '{"outcome":"runner_not_alive","exit":5,"resume_cursor":%d,"reply":{"matched":false,"resume_cursor":%d},"context":%s}\n' \
         "$cursor" "$cursor" "$(not_alive_ctx ",\"resume_cursor\":$cursor")" ;;
  esac
}

ready_now() {
  local phase
  session_ok || return 1; look; [ "$alive" = 1 ] || return 1
  field phase "$S/state/state.json" phase
  case $phase in idle|busy) return 0 ;; esac; return 1
}
do_ready() {
  k_wait_timeout_ms=${k_wait_timeout_ms:-60000} stopped_ends=0 wait_until ready_now
  case $? in 0) out_code ready 0 ;; 3) out_code wait_timeout 3 ;; *) out_code runner_not_alive 5 ;; esac
}

while IFS= read -r line; do
  read -r -a words <<<"$line"
  [ ${#words[@]} -gt 0 ] || continue
  op=${words[0]}
  for v in ${!k_*}; do unset "$v"; done
  for w in "${words[@]:1}"; do printf -v "k_${w%%=*}" '%s' "${w#*=}"; done
  case $op in
    quit) break ;;
    submit) do_submit 0 ;;
    run) do_submit 1 ;;
    wait)
      if ! session_ok; then out_code session_missing 5
      elif name=$(find_cmd "$k_id"); then do_wait "$name"
      elif pruned_of "" "$k_id"; then out_pruned "$k_id"
      else out_unknown "$k_id"; fi ;;
    cancel) do_cancel ;;
    stop) do_stop ;;
    status) do_status ;;
    lease) do_lease ;;
    lease_stop) do_lease_stop ;;
    waitfor) do_waitfor ;;
    send) do_send ;;
    signal) do_signal ;;
    resize) do_resize ;;
    ready) do_ready ;;
    withdraw) do_withdraw ;;
    output) do_output ;;
    *) out_code usage 2 ;;
  esac
done
do_lease_stop >/dev/null
