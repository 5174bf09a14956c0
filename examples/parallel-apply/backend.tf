# kld on its default address; the demo scripts re-initialise with
# KL_SERVER_URL and KL_STATE when they are set.
terraform {
  backend "http" {
    address        = "http://127.0.0.1:8080/v1/states/parallel-apply"
    lock_address   = "http://127.0.0.1:8080/v1/states/parallel-apply"
    unlock_address = "http://127.0.0.1:8080/v1/states/parallel-apply"
    lock_method    = "LOCK"
    unlock_method  = "UNLOCK"
  }
}
