variable "subnet_id" { type = string }
variable "tier" {
  type    = string
  default = "small"
}
resource "terraform_data" "primary" {
  input = { subnet = var.subnet_id, tier = var.tier }
}
resource "terraform_data" "replica" {
  for_each = toset(["eu", "us"])
  input    = { primary = terraform_data.primary.id, region = each.key }
}
