#!/bin/sh
# The container's entrypoint (Dockerfile): runs kld with the arguments given
# (default `serve`), or `healthcheck` for the image's HEALTHCHECK.
#
# In a container the embedded PostgreSQL would keep the states inside the
# container's own filesystem, lost with it: KL_DATABASE_URL is required.
set -eu

app=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = "healthcheck" ]; then
  # /readyz on the port kld listens on (KL_LISTEN), through loopback when it
  # listens on every interface; no curl in the image, so node asks.
  exec node -e '
    const listen = process.env.KL_LISTEN || "127.0.0.1:8080";
    const at = listen.lastIndexOf(":");
    let host = listen.slice(0, at).replace(/^\[|\]$/g, "");
    if (host === "" || host === "0.0.0.0" || host === "::") host = "127.0.0.1";
    if (host.includes(":")) host = "[" + host + "]";
    fetch("http://" + host + ":" + listen.slice(at + 1) + "/readyz", { signal: AbortSignal.timeout(4000) })
      .then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1));
  '
fi

if [ -z "${KL_DATABASE_URL:-}" ]; then
  echo "kld: KL_DATABASE_URL is required in the container (postgres://user:password@host:5432/database); the embedded PostgreSQL is for running kld outside a container" >&2
  exit 2
fi

if [ "$#" -eq 0 ]; then
  set -- serve
fi
exec node "$app/dist/src/kld.js" "$@"
