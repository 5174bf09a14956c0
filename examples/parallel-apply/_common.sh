# Sourced by parallel-demo.sh and wait-demo.sh: where kl and kld are, and a
# directory initialised against kld and bootstrapped once.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
REPO=$(cd ../.. && pwd)
KL_SERVER_URL=${KL_SERVER_URL:-http://127.0.0.1:8080}
KL_STATE=${KL_STATE:-parallel-apply}
export KL_SERVER_URL CHECKPOINT_DISABLE=1

kl() {
  node "$REPO/dist/src/cli/kl.js" "$@"
}

now() {
  date +%s.%N
}

since() {
  awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'
}

# A version no earlier run used, so planning it always replaces the resource.
fresh_version() {
  echo "v$(date +%s%N | cut -c1-13)"
}

# Records a variable value in the directory (NAME.auto.tfvars), so that a
# plain `terraform plan` afterwards agrees with what kl applied.
set_var() {
  printf '%s = "%s"\n' "$1" "$2" >"$1.auto.tfvars"
}

init() {
  [ -f "$REPO/dist/src/cli/kl.js" ] || (cd "$REPO" && npm run build >/dev/null)
  local address="$KL_SERVER_URL/v1/states/$KL_STATE"
  if ! grep -qs "\"$address\"" .terraform/terraform.tfstate; then
    terraform init -input=false -reconfigure \
      -backend-config="address=$address" \
      -backend-config="lock_address=$address" \
      -backend-config="unlock_address=$address" >/dev/null
  fi
  if [ -z "$(terraform state list 2>/dev/null)" ]; then
    echo "bootstrapping $KL_STATE: the first apply creates both slow resources"
    terraform apply -auto-approve -input=false >/dev/null
  fi
}

# Runs a command, prefixing its lines with a label; its exit code goes to FILE.
labelled() {
  local label=$1 file=$2
  shift 2
  {
    local rc=0
    "$@" 2>&1 || rc=$?
    echo "$rc" >"$file"
  } | sed -u "s/^/[$label] /"
}
