variable "env" {
  type    = string
  default = "demo"
}

variable "web_image" {
  type    = string
  default = "web:1"
}

variable "with_old" {
  type    = bool
  default = true
}

variable "with_new" {
  type    = bool
  default = false
}

locals {
  prefix = "kl-${var.env}"
  marker = terraform_data.marker.output
}

module "network" {
  source = "./modules/network"
  prefix = local.prefix
}

module "web" {
  source    = "./modules/web"
  subnet_id = module.network.subnet_id
  replicas  = 2
  image     = var.web_image
}

module "db" {
  source    = "./modules/db"
  subnet_id = module.network.subnet_id
}

resource "terraform_data" "marker" {
  input = "marker"
}

resource "terraform_data" "old" {
  count = var.with_old ? 1 : 0
  input = "old"
}

# Reads the marker only through a local value, which terraform's plan JSON does not describe.
resource "terraform_data" "new" {
  count = var.with_new ? 1 : 0
  input = local.marker
}

output "web_url" {
  value = module.web.url
}
