resource "terraform_data" "k" {
  for_each = toset(["q\"uote", "back\\slash", "$${interp}", "%%{dir}", "new\nline", "tab\t", "nb\u00a0sp", "ctl\u0001", "emoji😀", "plain$", "", "ünï"])
  input    = each.key
}
