variable "label" {
  type = string
}

resource "terraform_data" "deep" {
  input = "inner-${var.label}"
}
