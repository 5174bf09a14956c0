#!/usr/bin/env bash
# Re-records the terraform fixtures of src/domain/apply (terraform 1.11, offline:
# only terraform_data). Run from this directory: ./record.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TF_CLI_CONFIG_FILE="$work/tfrc" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
echo 'disable_checkpoint = true' > "$TF_CLI_CONFIG_FILE"
cp -r "$here/parallel" "$work/cfg"
cd "$work/cfg"
terraform init -input=false -no-color >/dev/null
terraform apply -auto-approve -input=false -no-color >/dev/null
cp terraform.tfstate "$here/parallel.tfstate.json"
terraform plan -input=false -no-color -out=p.tfplan \
  -var slow_a_version=v2 -var web_image=web:2 -var with_old=false -var with_new=true >/dev/null
terraform show -json p.tfplan | python3 -m json.tool > "$here/parallel.plan.json"
