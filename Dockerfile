# One executable built with `bun build --compile`, in a small image. PostgreSQL is the only other
# part: pass DATABASE_URL. Migrations run at start.
FROM oven/bun:1.4 AS build
WORKDIR /app
COPY package.json bun.lock ./
COPY patches ./patches
RUN bun install --frozen-lockfile
COPY tsconfig.json ./
COPY sql ./sql
COPY src ./src
RUN bun run build

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /app/dist/ams /usr/local/bin/ams
USER nobody
ENV HOST=0.0.0.0 PORT=3000
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s CMD ["/usr/local/bin/ams", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/ams"]
CMD ["serve"]
