# Sourced by scripts/test and scripts/test-python: `stage "name (what it checks)"` prints
# `==> name (what it checks)` and starts timing the step; `stage_report TITLE` prints each
# step's wall time, named up to its first " (" or ":". CI's budget is per run, and this
# says which step spends it.
stage_times=()
stage_name=""
stage_start=$SECONDS
stage() {
  if [ -n "$stage_name" ]; then
    local short=${stage_name%% (*}
    stage_times+=("$(printf '%5d s  %s' $((SECONDS - stage_start)) "${short%%:*}")")
  fi
  stage_name="$1"
  stage_start=$SECONDS
  [ -z "$1" ] || echo "==> $1"
}
stage_report() {
  stage ""
  echo "==> $1 ($SECONDS s in all)"
  printf '%s\n' "${stage_times[@]}"
}
