# Shared by the demos in this directory (sourced, not run): a private work
# directory, a kld of its own on a free loopback port, bounded steps, and a
# trap that stops kld (and its PostgreSQL) and removes every file on exit,
# also on failure or Ctrl-C. The sourcing script sets DEMO (its name), REPO
# and `set -euo pipefail` first.
STEP_TIMEOUT=${STEP_TIMEOUT:-120} # seconds any one terraform/kl command may take

# As root, the embedded PostgreSQL runs as OS user postgres, which must be able
# to walk into the data directory: 711 lets it through without listing.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kl-$DEMO.XXXXXX")
chmod 711 "$WORK"
KLD_PID=
KLD_DATA=

stop_kld() {
  [ -n "$KLD_PID" ] || return 0
  if kill -0 "$KLD_PID" 2>/dev/null; then
    kill -TERM "$KLD_PID" 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 "$KLD_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$KLD_PID" 2>/dev/null || true
  fi
  wait "$KLD_PID" 2>/dev/null || true
  # kld stops its PostgreSQL last; should kld have died outright, stop it here.
  local pidfile="$KLD_DATA/pgdata/postmaster.pid" pg
  if [ -f "$pidfile" ]; then
    pg=$(head -n1 "$pidfile")
    if [ -n "$pg" ] && grep -qs postgres "/proc/$pg/cmdline"; then
      kill -TERM "$pg" 2>/dev/null || true
      for _ in $(seq 1 300); do kill -0 "$pg" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pg" 2>/dev/null || true
    fi
  fi
  KLD_PID=
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$rc" != 0 ] && [ -n "$KLD_PID" ] && [ -f "$WORK/kld.log" ]; then
    echo "$DEMO: failed (exit $rc); the last lines kld logged:" >&2
    tail -n 20 "$WORK/kld.log" >&2 || true
  fi
  stop_kld
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() { printf '\n== %s\n' "$*"; }

# listening_url LOG: the URL of kld's "kld listening" line in LOG (fails until it is there).
listening_url() {
  node -e '
    for (const line of require("fs").readFileSync(process.argv[1], "utf8").split("\n")) {
      try {
        const entry = JSON.parse(line);
        if (entry.msg === "kld listening") { console.log(entry.url); process.exit(0); }
      } catch {} // a line still being written, or not JSON
    }
    process.exit(1);' "$1"
}

kl() { timeout "$STEP_TIMEOUT" node "$REPO/dist/src/cli/kl.js" "$@"; }
tf() { timeout "$STEP_TIMEOUT" terraform "$@"; }

# start_kld NAME: a fresh kld on its own data directory; sets KL_SERVER_URL.
# kld takes the port the kernel gives it as it binds, and says which in its log:
# a port picked free beforehand may be another program's by the time kld, after
# initdb, binds it (or another kld's, which would then answer this demo).
start_kld() {
  KLD_DATA="$WORK/$1-data"
  KL_DATA_DIR="$KLD_DATA" KL_GRPC_LISTEN=off KL_LOG_FORMAT=json \
    node "$REPO/dist/src/kld.js" serve --listen 127.0.0.1:0 >"$WORK/kld.log" 2>&1 &
  KLD_PID=$!
  KL_SERVER_URL=
  for _ in $(seq 1 600); do
    if ! kill -0 "$KLD_PID" 2>/dev/null; then
      echo "kld exited during start" >&2
      return 1
    fi
    [ -n "$KL_SERVER_URL" ] || KL_SERVER_URL=$(listening_url "$WORK/kld.log") || true
    export KL_SERVER_URL
    if [ -n "$KL_SERVER_URL" ] &&
      node -e 'fetch(process.argv[1]).then((r)=>process.exit(r.ok?0:1),()=>process.exit(1))' \
        "$KL_SERVER_URL/readyz"; then
      echo "$1 ready at $KL_SERVER_URL (fresh embedded PostgreSQL)"
      return 0
    fi
    sleep 0.1
  done
  echo "kld not ready within 60 s" >&2
  return 1
}
