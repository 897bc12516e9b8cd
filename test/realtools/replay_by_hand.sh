#!/usr/bin/env bash
# replay_by_hand.sh: the cases of the real-tools second pass, tried by hand
# as a new user would, against the binaries in $B (make build: bin/). Each
# prints what the runner answered; the tests in this directory (ends_test.go,
# evaluation_test.go, startup_test.go) hold the same cases to their
# expected answers. Needs Debian's sta, yosys, ngspice and python3.
#
#   make build && bash test/realtools/replay_by_hand.sh
REPO=${REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${B:-$REPO/bin}; T=$(mktemp -d); cd "$T" || exit 1
start() { "$B/runner" --session "$T/$1" --max-restarts 0 --log "$T/$1.log" "${@:2}" & sleep 0.3; "$B/master" ready --session "$T/$1" --wait-timeout 20s --wait-for-runner 20s >/dev/null || echo "  ($1 not ready: $(tail -1 $T/$1.log))"; }
stop() { "$B/master" stop --session "$T/$1" --force --wait >/dev/null 2>&1; }
sub() { local s=$1; shift; timeout "${TMO:-15}" "$B/master" submit --session "$T/$s" --json --wait "$@" 2>/dev/null | python3 -c '
import json,sys
try: r=json.load(sys.stdin)
except Exception: print("  -> no result (hang or timeout)"); sys.exit()
e=r.get("error") or {}
print("  -> status", r["status"], "| exit_reason", r.get("exit_reason"), "| value", repr(r.get("value")), "| message", repr((e.get("message") or "")[:110]))'; }
out() { local s=$1; shift; printf '  -> output %q\n' "$(timeout 15 "$B/master" submit --session "$T/$s" --no-value --wait "$@" 2>/dev/null; echo "<rc=$?>")"; }
echo "1. OpenSTA, 3 KB payloads"
start sta -- sta -no_splash
big=$(printf 'set y 0\n'; for i in $(seq 300); do printf 'incr y\n'; done)
echo " 300 incr lines:"; sub sta "$big"
echo " the same with 'error boom' in its middle:"; sub sta "$(printf 'set y 0\n'; for i in $(seq 150); do printf 'incr y\n'; done; printf 'error boom\n'; for i in $(seq 150); do printf 'incr y\n'; done)"
echo " y after it:"; sub sta 'set y'
stop sta
echo "2. commands that used to never end"
start y --kind yosys; echo " Yosys log -n x:"; out y 'log -n x'; stop y
start n --kind ngspice; echo " ngspice shell printf abc:"; out n 'shell printf abc'
echo " ngspice set prompt, then a command:"; sub n 'set prompt = "spice# "'; out n 'echo after'; stop n
cat > py.json <<'J'
{"kind": "pyrepl", "argv": ["python3", "-i", "-q", "-u"],
 "print": "print('{}')", "error": "^Traceback ", "prompt": "(?:>>>|\\.\\.\\.) "}
J
start py --driver py.json; echo " Python REPL (README's old JSON, no blank_line), a block without a blank line:"; sub py $'for i in range(2):\n    print(i)'; echo " then:"; out py "print('served')"; stop py
cat > pyf.json <<'J'
{"kind": "pyrepl", "argv": ["python3", "-i", "-q", "-u"], "print": "print('{}')", "source": "exec(open('/nonexistent' + {}).read())", "quote": "c", "error": "^Traceback "}
J
start pyf --driver pyf.json; echo " a driver whose source fails (FileNotFoundError):"; sub pyf 'print(1)'; stop pyf
echo '{"kind": "pyrepl", "argv": ["python3"], "print": "print(\"{}\")", "prompt": ".*"}' > dot.json
echo " a driver whose prompt is .*:"; "$B/runner" --session "$T/dot" --driver dot.json 2>&1 | sed 's/^/  -> /'; echo "  -> exit ${PIPESTATUS[0]}"
echo "3. start-up"
start lic -- sh -c 'printf "Checking out license FAKE_EDA..."; sleep 12; exec tclsh'
echo " licence wait of 12 s, then a command:"; TMO=40 sub lic 'puts licensed'; stop lic
echo '{"kind": "pyrepl", "argv": ["python3", "-i", "-q", "-u"], "print": "print(\"{}\")"}' > np.json
start np --driver np.json; echo " driver without prompt on a '>>> ' tool:"; out np $'print("a")\n1+1'; stop np
echo "4. cancel during ngspice tran (source, tran, let after_cancel = 1)"
cp "$REPO/testdata/flow/rc.cir" .; start nc --kind ngspice
id=$("$B/master" submit --session "$T/nc" $'source rc.cir\ntran 1n 100m\nlet after_cancel = 1'); sleep 2; "$B/master" cancel --session "$T/nc" "$id" >/dev/null; "$B/master" wait --session "$T/nc" "$id" >/dev/null 2>&1
echo " print after_cancel:"; out nc 'print after_cancel'; stop nc
echo "5. text typed as syntax"
mkdir -p "$T/my project"; "$B/runner" --session "$T/my project/sp" --log "$T/ys.log" --kind yosys & sleep 0.3; "$B/master" ready --session "$T/my project/sp" --wait-timeout 20s --wait-for-runner 20s >/dev/null
echo " Yosys in a session path with a space:"; printf '  -> output %q\n' "$(timeout 15 "$B/master" submit --session "$T/my project/sp" --no-value --wait 'log works' 2>&1)"; "$B/master" stop --session "$T/my project/sp" --force --wait >/dev/null
echo '{"kind": "shdrv", "argv": ["bash", "--norc", "-i"], "print": "echo {}", "source": ". {}"}' > sh.json
mkdir -p w; (cd w && "$B/runner" --session "$T/s;touch X;x" --log "$T/shd.log" --driver ../sh.json &) ; sleep 0.3; "$B/master" ready --session "$T/s;touch X;x" --wait-timeout 20s --wait-for-runner 20s >/dev/null
echo " bash driver (no quote key) in a session named 's;touch X;x':"; timeout 10 "$B/master" submit --session "$T/s;touch X;x" --wait 'echo hi' >/dev/null 2>&1; echo "  -> X created outside the session: $([ -e w/X ] && echo yes || echo no)"; "$B/master" stop --session "$T/s;touch X;x" --force --wait >/dev/null
start nz --kind ngspice; echo " ngspice payload with ^Z:"; sub nz $'echo a\x1aecho b'; echo " then:"; out nz 'echo alive'; stop nz
echo "6. driver files"
for body in '{"kind": "x", "argv": ["python3"], "print": "print(\"{}\")"} garbage' '{"kind": "x", "argv": ["python3"], "print": "print(\"{}\u0003\")"}' "{\"kind\": \"x\", \"argv\": [\"python3\"], \"print\": \"print('$(head -c 60000 /dev/zero | tr '\0' x){}')\"}"; do
  printf '%s' "$body" > d.json; echo " ${body:0:60}...:"; "$B/runner" --session "$T/d$RANDOM" --driver d.json 2>&1 | cut -c1-150 | sed 's/^/  -> /'; done
echo "7. Yosys errors"
printf 'module m(input a; endmodule\n' > bad.v
start y2 --kind yosys; echo " a Verilog syntax error:"; sub y2 "read_verilog $T/bad.v"; echo " log ERROR: only a message:"; sub y2 'log ERROR: only a message'; stop y2
echo "8. kill -9 of OpenSTA at its prompt, submit at once (4 tries)"
start k -- sta -no_splash
for i in 1 2 3 4; do pid=$(python3 -c "import json;print(json.load(open('$T/k/state/state.json'))['tool_pgid'])"); kill -9 $pid; sub k 'puts ran'; sleep 1; done; stop k
rm -rf "$T"
