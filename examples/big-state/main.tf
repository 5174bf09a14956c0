# big-state: a state of (3 × size + 6) instances for trying kld and `kl` at
# scale. Only terraform_data (built into terraform 1.4+), so it runs offline,
# needs no provider download and no credentials.

terraform {
  required_version = ">= 1.4"
}

variable "size" {
  description = "Number of (tag, label) pairs in the primary herd."
  type        = number
  default     = 50000
}

variable "deployment" {
  description = "Name of this deployment; changing it replaces the root chain."
  type        = string
  default     = "big-state"
}

# Root deployment chain: name → id → marker.
resource "terraform_data" "deployment_name" {
  input = var.deployment
}

resource "terraform_data" "deployment_id" {
  input = substr(sha256(terraform_data.deployment_name.output), 0, 16)
}

resource "terraform_data" "deployment_marker" {
  input = {
    deployment = terraform_data.deployment_name.output
    id         = terraform_data.deployment_id.output
  }
}

module "primary_herd" {
  source = "./modules/herd"
  size   = var.size
  seed   = terraform_data.deployment_id.output
}

# Sized 1 and seeded from the primary leader: everything here is in the
# primary leader's blast radius.
module "shadow_herd" {
  source = "./modules/herd"
  size   = 1
  seed   = module.primary_herd.leader_id
}

resource "terraform_data" "summary" {
  input = {
    deployment     = terraform_data.deployment_name.output
    primary_leader = module.primary_herd.leader_id
    primary_size   = module.primary_herd.size
    shadow_leader  = module.shadow_herd.leader_id
  }
}

output "summary" {
  value = terraform_data.summary.output
}
