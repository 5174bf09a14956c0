#!/usr/bin/env bash
# State-engine demo (ADR 0029): the big state on kld, then kl on the
# state-engine lane:
#   1. scope expansion of `kl plan -f canary.tf`, whose canary needs a
#      support node in another file that was never deployed: the server
#      classifies it `undeployed`, proves the scope safe, and kl fetches only
#      the slice (not the whole state);
#   2. a trusted `kl apply` on the lane: coarse lock, the scope's
#      reservations, one delta commit (source state-engine);
#   3. an unprovable scope (a module call the state never had) falls back to
#      the full-trunk lane, and says so;
#   4. `kl state mv` and `kl state rm`, each previewed with --dry-run first;
#   5. `kl rollback resource` restoring the removed address;
# after each write, terraform agrees: `terraform state pull` is kld's
# document and `terraform plan` has nothing to do. Ends with `kl history`.
#
# Self-contained: it starts its own kld (embedded PostgreSQL, fresh data
# directory, 127.0.0.1, a free port, gRPC off) and stops it and removes
# every file it made on exit, also on failure or Ctrl-C. Uses this
# directory's main.tf and modules/ at a small size (terraform_data only:
# offline, no provider download).
#
#   ./state-engine-demo.sh            # SIZE=20
#   SIZE=200 ./state-engine-demo.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
SIZE=${SIZE:-20}
STATE=state-engine-demo
DEMO=state-engine-demo
# The work directory, kld start/stop, cleanup trap, step/kl/tf helpers.
source "$HERE/demo-lib.sh"

# terraform agrees with what the lane committed: its `state pull` is kld's
# current document, and `plan` has nothing to do.
agrees() {
  tf state pull >"$WORK/pulled.json"
  node -e '
    const fs = require("fs");
    fetch(process.argv[2]).then((r) => r.text()).then((served) => {
      const same = JSON.stringify(JSON.parse(fs.readFileSync(process.argv[1], "utf8"))) ===
        JSON.stringify(JSON.parse(served));
      if (!same) { console.error("terraform state pull differs from the document kld serves"); process.exit(1); }
    });
  ' "$WORK/pulled.json" "$KL_SERVER_URL/v1/states/$STATE"
  local rc=0
  tf plan -no-color -input=false -lock=false -detailed-exitcode >"$WORK/plan.txt" || rc=$?
  if [ "$rc" != 0 ]; then
    cat "$WORK/plan.txt" >&2
    echo "terraform plan wants changes (exit $rc)" >&2
    return 1
  fi
  echo "terraform agrees: state pull = kld's document (serial $(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).serial' "$WORK/pulled.json")), plan: no changes"
}

serial() { node -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).serial' "$WORK/pulled.json"; }

[ -f "$REPO/dist/src/cli/kl.js" ] || (cd "$REPO" && npm run build >/dev/null)
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_CLI_CONFIG_FILE="$WORK/terraformrc"
: >"$TF_CLI_CONFIG_FILE" # terraform_data is built in: nothing to install
export KL_ACTOR=${KL_ACTOR:-demo@ops}
mkdir "$WORK/tf"
cp -r "$HERE/main.tf" "$HERE/modules" "$WORK/tf/"
cd "$WORK/tf"
start=$(date +%s)

step "1. the big state on kld (size=$SIZE)"
start_kld kld
cat >backend.tf <<EOF
terraform {
  backend "http" {
    address        = "$KL_SERVER_URL/v1/states/$STATE"
    lock_address   = "$KL_SERVER_URL/v1/states/$STATE"
    unlock_address = "$KL_SERVER_URL/v1/states/$STATE"
    lock_method    = "LOCK"
    unlock_method  = "UNLOCK"
  }
}
EOF
# size is pinned for kl's private directories too.
echo "size = $SIZE" >size.auto.tfvars
tf init -input=false >/dev/null
tf apply -no-color -auto-approve -input=false | grep '^Apply complete'
agrees
# kl plan/apply and kl state take the lane from KL_PROTOCOL (or --protocol, .kl.toml; auto by default).
export KL_PROTOCOL=state-engine
kl config

step "2. scope expansion: kl plan -f canary.tf (its support node was never deployed)"
cat >canary.tf <<'EOF'
# A canary beside the root chain. It needs canary_support (canary_support.tf),
# which has never been deployed.
resource "terraform_data" "canary" {
  input = "${terraform_data.deployment_marker.output.id}:${terraform_data.canary_support.output}"
}
EOF
cat >canary_support.tf <<'EOF'
resource "terraform_data" "canary_support" {
  input = "support"
}
EOF
kl plan -f canary.tf -o canary-plan.json

step "3. trusted native apply: kl apply canary-plan.json"
kl apply canary-plan.json
agrees

step "4. an unprovable scope falls back for real: kl plan -f canary_herd.tf"
cat >canary_herd.tf <<'EOF'
# A module call this state never had: the server cannot tell it from a typo.
module "canary_herd" {
  source = "./modules/herd"
  size   = 1
  seed   = "canary"
}
EOF
tf init -input=false >/dev/null
kl plan -f canary_herd.tf -o herd-plan.json
rm canary_herd.tf herd-plan.json
tf init -input=false >/dev/null

step "5. kl state mv: preview, move, move back"
kl state mv terraform_data.canary terraform_data.canary_moved --dry-run
kl state mv terraform_data.canary terraform_data.canary_moved
tf state list | grep canary
kl state mv terraform_data.canary_moved terraform_data.canary
agrees

step "6. kl state rm: preview, remove"
before_rm=$(serial)
kl state rm terraform_data.canary --dry-run
kl state rm terraform_data.canary
echo "terraform state list | grep canary:"
tf state list | grep canary || true

step "7. kl rollback resource: terraform_data.canary as it was at serial $before_rm"
kl rollback resource terraform_data.canary --to-serial "$before_rm" --dry-run
kl rollback resource terraform_data.canary --to-serial "$before_rm"
agrees

step "kl history $STATE"
kl history "$STATE"
step "kl runs $STATE"
kl runs "$STATE" --format csv | cut -d, -f3-5
echo "wall: $(($(date +%s) - start)) s"
