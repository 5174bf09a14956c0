variable "subnet_id" {
  type = string
}

variable "image" {
  type = string
}

resource "terraform_data" "server" {
  count = 2
  input = {
    subnet = var.subnet_id
    image  = var.image
    n      = count.index
  }
}

resource "terraform_data" "lb" {
  input = [for s in terraform_data.server : s.id]
}

output "url" {
  value = "http://${terraform_data.lb.id}"
}
