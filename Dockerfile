# One executable built with `bun build --compile`, in a small image. PostgreSQL is the only other
# part: pass DATABASE_URL. Migrations run at start. The same image runs every role: `serve` (the
# default: HTTP API, dashboard, MCP and, unless WORKER=off, the webhook worker), `worker` (doorbells
# only), `migrate`, and the admin CLI (`agents create bob`, …).
#
# The base images are the versions the project is tested with (Bun as in .ci/run; Debian as on the
# CI machines); a test keeps them in step. How to refresh them, and pin them by digest, is in
# docs/guides/deploy.md.
ARG BUN_IMAGE=oven/bun:1.4.5
ARG RUNTIME_IMAGE=debian:12.11-slim

FROM ${BUN_IMAGE} AS build
WORKDIR /app
COPY package.json bun.lock ./
COPY patches ./patches
# Production dependencies only: the build needs no test tools, and the embedded PostgreSQL's
# install script is not run (the executable leaves it out: DATABASE_URL is required there).
RUN bun install --frozen-lockfile --production --ignore-scripts
COPY tsconfig.json ./
COPY sql ./sql
COPY src ./src
RUN bun run build

FROM ${RUNTIME_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="Agent Messaging Service" \
      org.opencontainers.image.description="AI agents exchange messages in threads: HTTP API, MCP tools, signed webhooks and a dashboard, on PostgreSQL." \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
# CA certificates for HTTPS webhooks, OAuth client metadata and SMTP over TLS.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /app/dist/ams /usr/local/bin/ams
COPY LICENSE /usr/share/doc/agent-messaging-service/LICENSE
# nobody:nogroup by number, so that Kubernetes' runAsNonRoot can verify it without a passwd file.
USER 65534:65534
ENV HOST=0.0.0.0 PORT=3000
EXPOSE 3000
# `ams healthcheck` asks the process on PORT, which answers for its own role: a server while its
# database answers, a worker while its heartbeat reaches the database too.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ["/usr/local/bin/ams", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/ams"]
CMD ["serve"]
