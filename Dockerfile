# syntax=docker/dockerfile:1
# Multi-stage build of the brand binary into a small, non-root image.
#
# The binary is the libjpeg-turbo and libavcodec build (cgo, -tags
# brand_turbojpeg,brand_libav), which transforms images with about 2.6x less
# CPU than the pure-Go build that `go install` gives (docs/transform.md
# section 7) and decodes clip jobs' videos (section 12), which the pure-Go
# build refuses. The build stage runs scripts/build-image-binary.sh, which
# scripts/test.sh runs too: CI proves these steps without a container
# engine.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=docker
RUN scripts/build-image-binary.sh /out "${VERSION}"

# Distroless base: glibc, CA certificates and the nonroot user (65532), no
# shell; Debian 12, as the build stage, so the libraries the script staged
# (libjpeg.so.62 from Debian's libjpeg62-turbo; Debian's FFmpeg 5.1
# libavcodec.so.59, libswscale.so.6, libavutil.so.57 and the libraries they
# link, about 140 MB) match its glibc. /usr/lib is on the dynamic loader's
# default path.
FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/lib/ /usr/lib/
COPY --from=build /out/brand /usr/local/bin/brand
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/brand"]
CMD ["help"]
