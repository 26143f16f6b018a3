# MailFathom container image. Configured only by MAILFATHOM_ environment
# variables; see README.md. The image carries no PostgreSQL: point
# MAILFATHOM_DATABASE_URL at one (compose.yaml does).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/mailfathom ./cmd/mailfathom

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin mailfathom
COPY --from=build /out/mailfathom /usr/local/bin/mailfathom
USER 10001
ENV MAILFATHOM_HTTP_ADDR=0.0.0.0:8080 \
    MAILFATHOM_LOG_FORMAT=json
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mailfathom"]
CMD ["serve"]
