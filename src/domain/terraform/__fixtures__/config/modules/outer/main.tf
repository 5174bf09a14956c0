variable "label" {
  type = string
}

resource "terraform_data" "here" {
  input = "outer-${var.label}"
}

module "inner" {
  source = "../inner"
  count  = 2
  label  = "${var.label}-${count.index}"
}

output "label" {
  value = var.label
}
