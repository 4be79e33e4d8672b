# syntax=docker/dockerfile:1
# Multi-stage build of the brand binary into a minimal, non-root image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=docker
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/brand ./cmd/brand

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/brand /usr/local/bin/brand
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/brand"]
CMD ["help"]
