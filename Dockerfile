# Build:
#   docker build \
#     --build-arg VERSION="$(git describe --tags --always --dirty | sed 's/^v//')" \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     -t slot_exporter:"$(git describe --tags --always --dirty | sed 's/^v//')" .
#
# .dockerignore leaves .git out, so the version and revision come from these
# build arguments rather than from Go's VCS stamping.

# Build stage: a static binary, no cgo.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG REVISION=""
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w \
      -X github.com/prometheus/common/version.Version=${VERSION} \
      -X github.com/prometheus/common/version.Revision=${REVISION}" \
      -o /out/slot_exporter . \
 && echo 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' > /out/passwd \
 && echo 'nobody:x:65534:' > /out/group

# The simulator, for deploy/docker-compose.yml's traffic: its own image,
# built with --target slotsim; the default target below leaves it out.
FROM golang:1.26 AS slotsim-build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/slotsim ./cmd/slotsim

FROM scratch AS slotsim
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
COPY --from=slotsim-build /out/slotsim /bin/slotsim
USER 65534:65534
ENTRYPOINT ["/bin/slotsim"]

# Run stage: an empty, static base. Only the exporter (the simulator is
# for development, not for images), CA roots for rediss://, the default
# config, the licence and a passwd entry for the non-root user (so that
# `user: nobody` in compose files still resolves).
#
#   docker run -e REDIS_ADDR=redis:6379 slot_exporter
#   docker run -e REDIS_ADDR=redis:6379 slot_exporter --family 'streams=slotset:joishi:streams:*,limit=3'
#
# The default config (examples/container.yml) has the example families and
# no redis block: REDIS_ADDR is required. --config.file, or
# SLOT_EXPORTER_CONFIG, names another file.
FROM scratch
ARG VERSION=""
ARG REVISION=""
LABEL org.opencontainers.image.title="slot_exporter" \
      org.opencontainers.image.description="Prometheus exporter and leak detector for crash-safe limits kept in Redis" \
      org.opencontainers.image.source="https://github.com/slotexporter/slot_exporter" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
COPY --from=build /out/slot_exporter /bin/slot_exporter
COPY LICENSE /LICENSE
COPY examples/container.yml /etc/slot_exporter/slot_exporter.yml
ENV SLOT_EXPORTER_CONFIG=/etc/slot_exporter/slot_exporter.yml
# Numeric: Kubernetes can only check runAsNonRoot against a numeric user.
USER 65534:65534
EXPOSE 10121
ENTRYPOINT ["/bin/slot_exporter"]
