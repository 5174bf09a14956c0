variable "prefix" {
  type = string
}

resource "terraform_data" "vpc" {
  input = "${var.prefix}-vpc"
}

resource "terraform_data" "subnet" {
  input = {
    vpc  = terraform_data.vpc.output
    cidr = "10.0.1.0/24"
  }
}

output "subnet_id" {
  value = terraform_data.subnet.id
}
