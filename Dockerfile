# kld in a container: PostgreSQL is external (KL_DATABASE_URL is required),
# the process runs as the unprivileged `node` user, /readyz is the healthcheck.
# deploy/compose.yaml runs PostgreSQL and two replicas; docs/operations.md.

ARG NODE_IMAGE=node:20-bookworm-slim

# Build: every dependency, TypeScript compiled to dist/.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

# Run: production dependencies and the compiled server only.
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    KL_LISTEN=0.0.0.0:8080 \
    KL_LOG_FORMAT=json
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /src/dist/src ./dist/src
COPY migrations ./migrations
COPY proto ./proto
COPY deploy/docker-entrypoint.sh ./deploy/docker-entrypoint.sh
USER node
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/app/deploy/docker-entrypoint.sh", "healthcheck"]
ENTRYPOINT ["/app/deploy/docker-entrypoint.sh"]
CMD ["serve"]
