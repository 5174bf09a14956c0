#!/usr/bin/env bash
# Migration demo: a state on terraform's local backend moves into Kilolock
# (terraform init -migrate-state), gets a few applies by two people, moves back
# to local, and then comes back to a fresh Kilolock two ways:
#   kl import terraform.tfstate   -> the final snapshot only: 1 version
#   kl archive export / import    -> the whole history: every version, actor, time
# and prints both histories.
#
# Self-contained: it starts its own kld (embedded PostgreSQL, fresh data
# directory, 127.0.0.1, free ports, gRPC off), one per "server", and stops
# them and removes every file it made on exit, also on failure or Ctrl-C.
# Uses this directory's main.tf and modules/ at a small size (terraform_data
# only: offline, no provider download).
#
#   ./migration-demo.sh            # SIZE=3 CHANGES=3
#   SIZE=10 CHANGES=5 ./migration-demo.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
SIZE=${SIZE:-3}
CHANGES=${CHANGES:-3}
STATE=migration-demo
DEMO=migration-demo
# The work directory, kld start/stop, cleanup trap, step/kl/tf helpers.
source "$HERE/demo-lib.sh"

http_backend() {
  local address="$KL_SERVER_URL/v1/states/$STATE"
  cat >backend.tf <<EOF
terraform {
  backend "http" {
    address        = "$address"
    lock_address   = "$address"
    unlock_address = "$address"
    lock_method    = "LOCK"
    unlock_method  = "UNLOCK"
  }
}
EOF
}

# Whether STATE's `kl history` (as JSON) equals JSON: version, serial,
# lineage, source, actor, terraform version, counts and time of every row.
same_history() {
  node -e '
    const [a, b] = process.argv.slice(1).map((s) => JSON.stringify(JSON.parse(s)));
    process.exit(a === b ? 0 : 1);
  ' "$(kl --format json history "$1")" "$2"
}

[ -f "$REPO/dist/src/cli/kl.js" ] || (cd "$REPO" && npm run build >/dev/null)
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_CLI_CONFIG_FILE="$WORK/terraformrc"
: >"$TF_CLI_CONFIG_FILE" # terraform_data is built in: nothing to install
mkdir "$WORK/tf"
cp -r "$HERE/main.tf" "$HERE/modules" "$WORK/tf/"
cd "$WORK/tf"
start=$(date +%s)

step "1. terraform on the local backend (size=$SIZE)"
tf init -input=false >/dev/null
tf apply -no-color -auto-approve -input=false -var="size=$SIZE" | grep '^Apply complete'
echo "local terraform.tfstate: serial $(node -p 'JSON.parse(require("fs").readFileSync("terraform.tfstate", "utf8")).serial')"

step "2. move it into Kilolock: terraform init -migrate-state"
start_kld kld-1
http_backend
TF_HTTP_USERNAME=alice tf init -input=false -migrate-state -force-copy >/dev/null
rm -f terraform.tfstate terraform.tfstate.backup
kl states

step "3. $CHANGES changes, by alice and bob"
for i in $(seq 1 "$CHANGES"); do
  who=alice
  [ $((i % 2)) = 0 ] && who=bob
  printf '%s: ' "$who"
  TF_HTTP_USERNAME=$who tf apply -no-color -auto-approve -input=false -var="size=$((SIZE + i))" | grep '^Apply complete'
done
kl archive export "$STATE" -o "$WORK/$STATE.kla"
echo "kl archive export $STATE -o $STATE.kla: $(($(wc -l <"$WORK/$STATE.kla") - 1)) events"
step "kl history $STATE (on kld-1, the original)"
kl history "$STATE"
original=$(kl --format json history "$STATE")

step "4. back to the local backend: terraform init -migrate-state"
rm backend.tf
tf init -input=false -migrate-state -force-copy >/dev/null
echo "local terraform.tfstate: serial $(node -p 'JSON.parse(require("fs").readFileSync("terraform.tfstate", "utf8")).serial')"
stop_kld
echo "kld-1 stopped; its database is gone with it"

step "5. back into a fresh Kilolock, two ways"
start_kld kld-2
kl import terraform.tfstate --name "$STATE/snapshot"
kl archive import "$WORK/$STATE.kla" --name "$STATE/restored"

step "kl history $STATE/snapshot (kl import of the final terraform.tfstate: the current snapshot only)"
kl history "$STATE/snapshot"

step "kl history $STATE/restored (kl archive import: every version, actor and time)"
kl history "$STATE/restored"

if same_history "$STATE/restored" "$original"; then
  echo "the restored history equals the original's: $(node -p 'JSON.parse(process.argv[1]).length' "$original") versions, same serials, lineage, actors and times"
else
  echo "the restored history differs from the original's" >&2
  exit 1
fi
echo "wall: $(($(date +%s) - start)) s"
