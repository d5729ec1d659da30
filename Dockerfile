# beachd's container image: a static binary on distroless, as a non-root user.
#
#   docker build -t beachd .
#   docker run -d --name beachd -p 8025:8025 \
#     -v /etc/beachd:/etc/beachd:ro -v beachd-data:/var/lib/beachd \
#     --env-file /etc/beachd/beachd.env beachd
#
# The configuration must listen on all interfaces inside the container
# (listen: 0.0.0.0:8025) and keep its data in the volume
# (data_dir: /var/lib/beachd). See docs/deployment.md.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/beachd ./cmd/beachd \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/beachd-healthcheck ./deploy/healthcheck \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/beachd /out/beachd-healthcheck /usr/local/bin/
# The data directory belongs to the nonroot user (65532) before the volume is
# mounted, so a new named volume starts with that owner.
COPY --from=build --chown=65532:65532 /out/data /var/lib/beachd
USER 65532:65532
WORKDIR /var/lib/beachd
VOLUME ["/var/lib/beachd"]
EXPOSE 8025
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD ["/usr/local/bin/beachd-healthcheck", "http://127.0.0.1:8025/healthz"]
ENTRYPOINT ["/usr/local/bin/beachd"]
CMD ["serve", "--config", "/etc/beachd/beachd.yaml"]
