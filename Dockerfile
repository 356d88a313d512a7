# Build stage: static binaries, no cgo.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${VERSION}" -o /out/slot_exporter . \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/slotsim ./cmd/slotsim \
 && echo 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' > /out/passwd \
 && echo 'nobody:x:65534:' > /out/group

# Run stage: an empty, static base. Only the binaries, CA roots for
# rediss://, an example config and a passwd entry for the non-root user.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
COPY --from=build /out/slot_exporter /bin/slot_exporter
COPY --from=build /out/slotsim /bin/slotsim
COPY examples/slot_exporter.yml /etc/slot_exporter/slot_exporter.yml
USER nobody
EXPOSE 10121
ENTRYPOINT ["/bin/slot_exporter"]
CMD ["--config.file=/etc/slot_exporter/slot_exporter.yml"]
