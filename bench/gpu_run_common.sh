# Sourced by the packed GPU run scripts (bench/ikbo_fa_gpu_run.sh, bench/small_table_gpu_run.sh):
# what their `pack` and `run` commands share. Needs bash.
#
# pack_bins BUILD DIR: xz-packs test_optimized, tbe-bench and tbe-verify of BUILD into
#   DIR/bin.tar.xz and, with VARIANTS="NAME=PATH ...", each PATH (another build's tbe-bench) as
#   DIR/tbe-bench-NAME.xz.
pack_bins() {
  local build=$1 dir=$2 v
  mkdir -p "$dir"
  tar cf - -C "$build" tests/test_optimized bench/tbe-bench tools/tbe-verify \
    | xz -T2 -3 > "$dir/bin.tar.xz" || return 1
  for v in ${VARIANTS:-}; do
    xz -T2 -3 -c "${v#*=}" > "$dir/tbe-bench-${v%%=*}.xz" || return 1
  done
}

# usage SCRIPT: prints the script's header comment (its usage) and exits 2.
usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$1"
  exit 2
}

# start_run NAME DIR DEFAULT_STAGES: on the GPU machine, from the repository root. Sets root, dir
# (DIR made absolute), STAGES, T / B / V (the unpacked test_optimized, tbe-bench, tbe-verify under
# $bin), want STAGE, save; logs and JSON go to a scratch $OUT and leave as one archive,
# $FINAL/NAME-logs.tar.xz (FINAL = the caller's $OUT, default /tmp/out: the device returns a
# limited number of files from $OUT, one file loses none), written by save and at exit.
start_run() {
  local name=$1
  root=$(pwd)
  dir=$(cd "$2" && pwd) || exit 1
  FINAL=${OUT:-/tmp/out}; mkdir -p "$FINAL"
  OUT=$(mktemp -d "/tmp/$name-logs.XXXXXX")
  LOGS="$FINAL/$name-logs.tar.xz"
  trap 'save && echo "logs: $LOGS"' EXIT
  STAGES=",${STAGES:-$3},"
  bin=/tmp/$name-bin; mkdir -p "$bin"
  xz -dc "$dir/bin.tar.xz" | tar xf - -C "$bin" || exit 1
  . "$root/bench/gpu_env.sh"
  T=$bin/tests/test_optimized; B=$bin/bench/tbe-bench; V=$bin/tools/tbe-verify
}
save() { tar cJf "$LOGS" -C "$OUT" .; }
want() { [[ $STAGES == *",$1,"* ]]; }
