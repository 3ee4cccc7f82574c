#!/usr/bin/env bash
# make test's runner: runs each stage given as a make target, in order, and prints a table of
# their wall seconds and whether each found its caches warm, at the end, also when a stage
# fails (the first failure stops the run, as make would). Every line of the stages' output is
# stamped with the time of day.
#
# Stages beside the others (make test's order, Makefile TEST_STAGES):
#   &name   make target name in the background at niceness 19: it takes only the CPU the
#           foreground leaves idle. The test-tool builds (Kubernetes, the Prometheus Operator,
#           Helm, cosign) run so from the start.
#   @name   name in the background at niceness 0, the foreground stages from then on at 10:
#           the real-cluster suite, which waits on its cluster most of the time (a third of a
#           core), runs so beside the CPU-bound stages, and its timing is not starved by them.
#   @name<dep  the same, but name starts only once the background stage dep has succeeded
#           (and not at all if it failed), without holding up the foreground stages meanwhile:
#           the suite starts as soon as its tools are built, cold or warm.
#   wait:name  waits for that background stage; wait  for all of them. A failed one fails the
#           run, printing the end of its log ($(BIN)/stages/<name>.log).
#
# The caches are the Go build and module caches and the cached test tools in
# $XDG_CACHE_HOME/emptydir-guard: the run counts as cold when they held under 500 MB at its start,
# and each stage's row says by how much they grew while it ran (background stages included).
set -uo pipefail
make=${MAKE:-make}
go=${GO:-go}
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/emptydir-guard
caches=("$("$go" env GOCACHE)" "$("$go" env GOMODCACHE)" "$cache_root")
logdir=${STAGES_LOG_DIR:-bin/stages}
mkdir -p "$logdir"
# Every go test of the stages keeps its -json events here (hack/gotest.sh); at the end the
# tests that ran are listed in $logdir/tests-run.txt and compared with the committed list.
export TEST_JSON_DIR=$(cd "$logdir" && pwd)/json
rm -rf "$TEST_JSON_DIR"

cache_mb() {
  local dirs=()
  for d in "${caches[@]}"; do [ -d "$d" ] && dirs+=("$d"); done
  [ ${#dirs[@]} -gt 0 ] || { echo 0; return; }
  du -smc "${dirs[@]}" 2>/dev/null | awk 'END {print $1}'
}

# cpu_jiffies prints the machine's busy and total CPU time so far (/proc/stat, in clock ticks).
cpu_jiffies() {
  awk '$1 == "cpu" { busy = $2 + $3 + $4 + $7 + $8 + $9; print busy, busy + $5 + $6 }' /proc/stat
}
# run_timed file command...: runs the command and writes the CPU seconds (user + system) it and
# its descendants used to file: a stage's cost in core-seconds, beside its wall seconds.
# Also writes the exit status to <file>.rc, which "@name<dep" waits for.
run_timed() {
  local out=$1 rc
  shift
  "$@"
  rc=$?
  # Not piped: a pipeline's side is a subshell, whose children are not these.
  times >"$out.times"
  awk 'NR == 2 { split($0, f, /[ms ]+/); printf "%.0f\n", f[1] * 60 + f[2] + f[3] * 60 + f[4] }' "$out.times" >"$out"
  date +%s >"$out.end"
  echo "$rc" >"$out.rc"
  return $rc
}
# after_then_run dep-rc-file start-file cpu-file command...: waits for a background stage's
# status file, then runs the command as run_timed does if it was 0, noting when it started.
after_then_run() {
  local dep_rc=$1 start=$2
  shift 2
  until [ -f "$dep_rc" ]; do sleep 2; done
  if [ "$(cat "$dep_rc")" != 0 ]; then
    echo "test-stages: not started: ${dep_rc%.cpu.rc} failed"
    echo 1 >"$1.rc"
    return 1
  fi
  date +%s >"$start"
  run_timed "$@"
}
export -f run_timed after_then_run

rows=()
start_all=$(date +%s)
read -r start_busy start_total < <(cpu_jiffies)
start_mb=$(cache_mb)
# The caches' size after the last stage that ended: the next one's start, so that each stage
# costs one du of the caches (seconds when they are warm), not two.
last_mb=$start_mb
start_state=warm
[ "$start_mb" -lt 500 ] && start_state=cold
declare -A bg_pid bg_start bg_mb
status=0

table() {
  local total=$(( $(date +%s) - start_all )) busy all
  read -r busy all < <(cpu_jiffies)
  echo
  echo "== make test stages: caches $start_state at the start ($start_mb MB), $(( $(cache_mb) - start_mb )) MB more at the end"
  printf '%-28s %8s %8s %10s  %s\n' stage seconds "CPU s" "cache +MB" result
  for r in "${rows[@]}"; do printf '%-28s %8s %8s %10s  %s\n' $r; done
  printf '%-28s %8s %8s\n' total "$total" "$(( (busy - start_busy) / $(getconf CLK_TCK) ))"
  echo "machine: $(nproc) cores, busy $(( (busy - start_busy) * 100 / (all - start_total + 1) ))% of the run (CPU s: the stage's processes, user + system)"
  if command -v jq >/dev/null && [ -d "$TEST_JSON_DIR" ]; then
    local earlier=()
    [ -f test/tests-run.txt ] && earlier=(test/tests-run.txt)
    hack/test-names.sh "$TEST_JSON_DIR" "${earlier[@]}" >"$logdir/tests-run.txt" ||
      echo "test-stages: listing the tests run failed" >&2
  fi
}
# A stage still running when the run ends (a failed stage, a signal) would outlive it: stop
# its whole process group.
fg_pid=
finish() {
  local name
  [ -z "$fg_pid" ] || kill -- -"$fg_pid" 2>/dev/null
  for name in "${!bg_pid[@]}"; do kill -- -"${bg_pid[$name]}" 2>/dev/null; done
  table
}
trap finish EXIT
trap 'exit 130' INT TERM

record() { # name seconds grewMB status cpu-file
  local result=ok cpu
  [ "$4" = 0 ] || result=FAILED
  cpu=$(cat "$5" 2>/dev/null)
  rows+=("$1 $2 ${cpu:--} $3 $result")
}

# wait_background [name]: waits for the background stage name, or for all of them.
wait_background() {
  local name rc t1 names=("${!bg_pid[@]}")
  [ $# = 0 ] || names=("$1")
  for name in "${names[@]}"; do
    if [ -z "${bg_pid[$name]:-}" ]; then
      echo "test-stages: no background stage $name to wait for" >&2
      return 1
    fi
    wait "${bg_pid[$name]}"
    rc=$?
    t1=$(date +%s)
    last_mb=$(cache_mb)
    # From its start (a stage that waited for another: once that one succeeded) to its end,
    # not to this wait.
    [ ! -f "$logdir/$name.start" ] || bg_start[$name]=$(cat "$logdir/$name.start")
    [ ! -f "$logdir/$name.cpu.end" ] || t1=$(cat "$logdir/$name.cpu.end")
    record "$name(background)" $(( t1 - bg_start[$name] )) $(( last_mb - bg_mb[$name] )) "$rc" "$logdir/$name.cpu"
    if [ "$rc" != 0 ]; then
      echo "test-stages: background stage $name failed; the end of its log ($logdir/$name.log):" >&2
      tail -n 400 "$logdir/$name.log" >&2
      status=1
    fi
    unset "bg_pid[$name]"
  done
  return $status
}

# stamp prefixes each line it reads with the time of day, so that a log tells when each step
# ran (a bash builtin, no process per line).
stamp() {
  local line
  while IFS= read -r line || [ -n "$line" ]; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done
}

# start_background name niceness [dep]
start_background() {
  local name=$1 nice=$2 dep=${3:-}
  bg_start[$name]=$(date +%s)
  bg_mb[$name]=$last_mb
  rm -f "$logdir/$name.cpu.rc" "$logdir/$name.cpu.end" "$logdir/$name.start"
  # A process group of its own (setsid), so that a failed run can stop all of it.
  if [ -z "$dep" ]; then
    setsid nice -n "$nice" bash -c 'run_timed "$@"' - "$logdir/$name.cpu" "$make" "$name" > >(stamp >"$logdir/$name.log") 2>&1 &
    echo "test-stages: $name started in the background at niceness $nice (log $logdir/$name.log)"
  else
    [ -n "${bg_pid[$dep]:-}" ] || { echo "test-stages: $name waits for $dep, which is no background stage" >&2; exit 1; }
    setsid nice -n "$nice" bash -c 'after_then_run "$@"' - "$logdir/$dep.cpu.rc" "$logdir/$name.start" "$logdir/$name.cpu" "$make" "$name" \
      > >(stamp >"$logdir/$name.log") 2>&1 &
    echo "test-stages: $name starts in the background at niceness $nice once $dep has succeeded (log $logdir/$name.log)"
  fi
  bg_pid[$name]=$!
}

# The foreground stages' niceness: 0, and 10 once a stage runs beside them at 0 ("@"), so
# that the real-cluster suite's timing is never starved by the builds beside it.
fg_nice=0

for stage in "$@"; do
  case $stage in
    \&*)
      start_background "${stage#&}" 19
      ;;
    @*\<*)
      stage=${stage#@}
      start_background "${stage%%<*}" 0 "${stage#*<}"
      fg_nice=10
      ;;
    @*)
      start_background "${stage#@}" 0
      fg_nice=10
      ;;
    wait)
      wait_background || exit 1
      ;;
    wait:*)
      wait_background "${stage#wait:}" || exit 1
      ;;
    *)
      t0=$(date +%s)
      mb0=$last_mb
      # In a process group of its own and waited for, so that a signal to this script is
      # handled at once (bash runs traps only between commands) and stops all of the stage.
      setsid nice -n "$fg_nice" bash -c 'run_timed "$@"' - "$logdir/$stage.cpu" "$make" "$stage" > >(stamp) 2>&1 &
      fg_pid=$!
      wait "$fg_pid"
      rc=$?
      fg_pid=
      t1=$(date +%s)
      last_mb=$(cache_mb)
      record "$stage" $(( t1 - t0 )) $(( last_mb - mb0 )) "$rc" "$logdir/$stage.cpu"
      [ "$rc" = 0 ] || exit "$rc"
      ;;
  esac
done
wait_background || exit 1
