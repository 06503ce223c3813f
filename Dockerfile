# narwhal-serve (the router), narwhal-attest (the engine sidecar),
# narwhal-check (preflight) and narwhal-engine (simulated engines, for the
# dev overlay) in one
# small image: a static Go build, copied onto distroless "static" as the
# non-root user. Build with `make image` (docker or a compatible builder).
# deploy/kubernetes runs the router with `narwhal-serve` and the sidecar
# with `narwhal-attest` from this image.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X github.com/narwhal-go/narwhal/internal/version.Version=${VERSION}" \
	-o /out/ ./cmd/narwhal-serve ./cmd/narwhal-attest ./cmd/narwhal-check ./cmd/narwhal-engine

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
EXPOSE 8000
ENTRYPOINT ["/usr/local/bin/narwhal-serve"]
