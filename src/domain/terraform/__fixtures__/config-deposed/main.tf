variable "rev" {
  type    = string
  default = "v1"
}

resource "terraform_data" "cbd" {
  input            = "cbd-${var.rev}"
  triggers_replace = [var.rev]
  lifecycle {
    create_before_destroy = true
  }
  provisioner "local-exec" {
    when    = create
    command = "test ${var.rev} != v4"
  }
}

resource "terraform_data" "other" {
  count = 2
  input = "other-${count.index}"
}
