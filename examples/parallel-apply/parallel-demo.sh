#!/usr/bin/env bash
# Two engineers change different resources of one state at the same time.
# alice replaces terraform_data.slow_a, bob replaces terraform_data.slow_b;
# each replacement takes sleep_seconds (10 s). With kl apply the two run in
# parallel: the wall clock stays close to one apply, and apply_runs shows
# two overlapping windows.
#
#   ./parallel-demo.sh            # both engineers, one terminal
#   ./parallel-demo.sh slow_a     # terminal 1 (alice)
#   ./parallel-demo.sh slow_b     # terminal 2 (bob)
source "$(dirname "$0")/_common.sh"
mode=${1:-both}
init

plan() { # resource
  set_var "$1_version" "$(fresh_version)"
  kl plan -f "$1.tf" -o "$1.kl-plan.json"
}

actor() {
  [ "$1" = slow_a ] && echo alice || echo bob
}

case "$mode" in
  slow_a | slow_b)
    plan "$mode"
    start=$(now)
    kl apply "$mode.kl-plan.json" --actor "$(actor "$mode")"
    echo "wall: $(since "$start") s"
    ;;
  both)
    plan slow_a
    plan slow_b
    tmp=$(mktemp -d)
    start=$(now)
    labelled alice "$tmp/a" kl apply slow_a.kl-plan.json --actor alice &
    labelled bob "$tmp/b" kl apply slow_b.kl-plan.json --actor bob &
    wait
    echo "wall for both applies: $(since "$start") s (each replacement alone sleeps sleep_seconds, 10 s by default)"
    a=$(cat "$tmp/a") b=$(cat "$tmp/b")
    rm -rf "$tmp"
    echo
    echo "apply_runs of $KL_STATE, newest first:"
    kl query "SELECT actor, status, started_at, finished_at, committed_version
                FROM apply_runs WHERE state_name = '$KL_STATE' ORDER BY started_at DESC LIMIT 2"
    [ "$a" = 0 ] && [ "$b" = 0 ]
    ;;
  *)
    echo "usage: $0 [both|slow_a|slow_b]" >&2
    exit 3
    ;;
esac
