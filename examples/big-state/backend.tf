# kld on its default address. Point elsewhere at init time:
#   terraform init -reconfigure -backend-config="address=http://kl.internal:8080/v1/states/big-state" ...
terraform {
  backend "http" {
    address        = "http://127.0.0.1:8080/v1/states/big-state"
    lock_address   = "http://127.0.0.1:8080/v1/states/big-state"
    unlock_address = "http://127.0.0.1:8080/v1/states/big-state"
    lock_method    = "LOCK"
    unlock_method  = "UNLOCK"
  }
}
