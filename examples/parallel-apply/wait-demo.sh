#!/usr/bin/env bash
# Two engineers change the same resource (terraform_data.slow_a). The second
# kl apply finds it reserved, prints who holds it every few seconds, and
# proceeds once the first commits: its plan is then stale (slow_a changed
# under it), so it re-plans once and applies.
#
#   ./wait-demo.sh                # both engineers, one terminal
#   ./wait-demo.sh blocker        # terminal 1 (alice)
#   ./wait-demo.sh waiter         # terminal 2 (bob), while alice applies
source "$(dirname "$0")/_common.sh"
mode=${1:-both}
init

blocker() {
  set_var slow_a_version "$(fresh_version)"
  kl plan -f slow_a.tf -o blocker.kl-plan.json >/dev/null
  kl apply blocker.kl-plan.json --actor alice
}

waiter() {
  set_var slow_a_version "$(fresh_version)"
  kl plan -f slow_a.tf -o waiter.kl-plan.json >/dev/null
  local rc=0
  kl apply waiter.kl-plan.json --actor bob --wait 5m || rc=$?
  if [ "$rc" = 2 ]; then
    echo "re-planning once against the new trunk"
    kl plan -f slow_a.tf -o waiter.kl-plan.json >/dev/null
    kl apply waiter.kl-plan.json --actor bob --wait 5m
  else
    return "$rc"
  fi
}

case "$mode" in
  blocker) blocker ;;
  waiter) waiter ;;
  both)
    tmp=$(mktemp -d)
    start=$(now)
    labelled alice "$tmp/a" blocker &
    # bob starts while alice's replacement is running
    sleep 4
    labelled bob "$tmp/b" waiter &
    wait
    echo "wall: $(since "$start") s"
    a=$(cat "$tmp/a") b=$(cat "$tmp/b")
    rm -rf "$tmp"
    [ "$a" = 0 ] && [ "$b" = 0 ]
    ;;
  *)
    echo "usage: $0 [both|blocker|waiter]" >&2
    exit 3
    ;;
esac
