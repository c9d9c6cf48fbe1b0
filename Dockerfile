# syntax=docker/dockerfile:1
# The manager and worker images for a Docker/BuildKit build:
#   docker buildx build --platform linux/amd64,linux/arm64 --target manager -t <repo>/manager:<tag> .
#   docker buildx build --platform linux/amd64,linux/arm64 --target worker  -t <repo>/worker:<tag> .
# Without a daemon, `make images` builds the same layout (static binary,
# CA certificates, nonroot 65532) with go-containerregistry; see README.

# The compiler runs on the build host's platform and cross-compiles, which
# is far faster than compiling under emulation for the target platform.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Static binaries (no libc on the base), no host paths or VCS state in them,
# so they depend on the sources and the toolchain only.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/ ./cmd/manager ./cmd/worker

# distroless static: CA certificates, tzdata, /etc/passwd with nonroot
# (65532) and nothing else: no shell, no package manager.
FROM gcr.io/distroless/static:nonroot AS worker
COPY --from=build /out/worker /worker
USER 65532:65532
ENTRYPOINT ["/worker"]

# Last, so a plain `docker build .` gives the manager.
FROM gcr.io/distroless/static:nonroot AS manager
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
