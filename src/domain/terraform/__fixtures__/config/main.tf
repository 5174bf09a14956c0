variable "rev" {
  type    = string
  default = "v1"
}

resource "terraform_data" "single" {
  input = "single-value"
}

resource "terraform_data" "counted" {
  count = 3
  input = {
    idx  = count.index
    lead = terraform_data.single.output
  }
}

resource "terraform_data" "keyed" {
  for_each = toset(["alpha", "beta", "with space", "10"])
  input    = "key-${each.key}"
  lifecycle {
    create_before_destroy = true
  }
}

resource "terraform_data" "changeable" {
  input = "changeable-${var.rev}"
  lifecycle {
    postcondition {
      condition     = self.output != ""
      error_message = "must not be empty"
    }
  }
}

module "outer" {
  source   = "./modules/outer"
  for_each = toset(["x", "y"])
  label    = each.key
}

data "terraform_remote_state" "self" {
  backend = "local"
  config = {
    path = "${path.module}/other-state.json"
  }
}

check "sanity" {
  assert {
    condition     = length(terraform_data.counted) == 3
    error_message = "three counted"
  }
}

output "plain" {
  value = terraform_data.single.output
}

output "secret" {
  value     = "hunter2"
  sensitive = true
}

output "structured" {
  value = {
    list = [1, 2, 3]
    map  = { a = "b" }
  }
}
