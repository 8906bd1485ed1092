# syntax=docker/dockerfile:1
# radixgate production image: multi-stage, Node.js 24 LTS, runs as the unprivileged "node" user.

FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:24-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --chown=node:node package.json ./
USER node
EXPOSE 30000
# Probes the port the router really uses: its --port flag (read from PID 1's command line, the
# exec-form ENTRYPOINT below) or RADIXGATE_PORT, as the router itself reads them.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["node", "dist/healthcheck.js"]
# Exec form: node is PID 1 and receives SIGTERM from `docker stop` directly (radixgate drains
# in-flight requests for --shutdown-grace-secs, then exits 0). Flags or RADIXGATE_* variables
# configure it, e.g.
#   docker run -p 30000:30000 -e RADIXGATE_WORKER_URLS="http://10.0.0.1:30000 http://10.0.0.2:30000" radixgate
ENTRYPOINT ["node", "dist/cli.js"]
