# parallel-apply: one state shared by two engineers. Three modules (network,
# web, db) and two slow resources in files of their own (slow_a.tf,
# slow_b.tf). Only terraform_data and local-exec: offline, no provider to
# install, no credentials. See README.md.

terraform {
  required_version = ">= 1.5"
}

variable "env" {
  type    = string
  default = "demo"
}

variable "sleep_seconds" {
  description = "How long creating or replacing each slow resource takes."
  type        = number
  default     = 10
}

variable "web_image" {
  type    = string
  default = "web:1"
}

variable "db_tier" {
  type    = string
  default = "small"
}

locals {
  prefix = "kl-${var.env}"
}

module "network" {
  source = "./modules/network"
  prefix = local.prefix
}

module "web" {
  source    = "./modules/web"
  subnet_id = module.network.subnet_id
  image     = var.web_image
}

module "db" {
  source    = "./modules/db"
  subnet_id = module.network.subnet_id
  tier      = var.db_tier
}

output "web_url" {
  value = module.web.url
}

output "db_endpoint" {
  value = module.db.endpoint
}
