# Engineer B's resource: changing slow_b_version replaces it, which takes
# sleep_seconds.
variable "slow_b_version" {
  type    = string
  default = "v1"
}

resource "terraform_data" "slow_b" {
  input            = "${local.prefix}-b-${var.slow_b_version}"
  triggers_replace = [var.slow_b_version]

  provisioner "local-exec" {
    command = "sleep ${var.sleep_seconds}"
  }
}

output "slow_b" {
  value = terraform_data.slow_b.output
}
