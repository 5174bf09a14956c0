# Engineer A's resource: changing slow_a_version replaces it, which takes
# sleep_seconds.
variable "slow_a_version" {
  type    = string
  default = "v1"
}

resource "terraform_data" "slow_a" {
  input            = "${local.prefix}-a-${var.slow_a_version}"
  triggers_replace = [var.slow_a_version]

  provisioner "local-exec" {
    command = "sleep ${var.sleep_seconds}"
  }
}

output "slow_a" {
  value = terraform_data.slow_a.output
}
