# A herd: one leader and `size` (tag, label) pairs fanned out from it.
#
# Every member references the leader and nothing else, so the dependency
# edges grow linearly with size (one per member). Chaining members to each
# other, or making each label depend on every tag, would grow them
# quadratically and turn a 50k herd into billions of edges.

variable "size" {
  type = number
}

variable "seed" {
  type = string
}

resource "terraform_data" "leader" {
  input = substr(sha256("leader:${var.seed}"), 0, 16)
}

resource "terraform_data" "tag" {
  count = var.size
  input = substr(sha256("tag:${terraform_data.leader.output}:${count.index}"), 0, 8)
}

resource "terraform_data" "label" {
  count = var.size
  input = "label-${count.index}-${substr(terraform_data.leader.output, 0, 6)}"
}

output "leader_id" {
  value = terraform_data.leader.output
}

output "size" {
  value = length(terraform_data.tag)
}
