# Sandcastle's image: a release build of the server (the `sandcastle` crate, which holds no
# GitHub stand-in and no test key) on a distroless base, running as the non-root user the Helm
# chart expects (65532). It ships pinned, static helm and kustomize binaries in /usr/local/bin for
# rendering Blueprint sources (`helm template`, `kustomize build`); their versions are the ones
# scripts/helm and scripts/kustomize build for the tests, so keep the three in step.
#   docker build -t REGISTRY/sandcastle:0.1.0 . && docker push REGISTRY/sandcastle:0.1.0
FROM golang:1.26-bookworm AS tools
ARG HELM_VERSION=v4.3.1
ARG KUSTOMIZE_VERSION=v5.8.2
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOBIN=/out
RUN go install -trimpath -ldflags "-s -w" "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}" \
 && go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@${KUSTOMIZE_VERSION}"

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p sandcastle --bin sandcastle

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/sandcastle /usr/local/bin/sandcastle
COPY --from=tools /out/helm /usr/local/bin/helm
COPY --from=tools /out/kustomize /usr/local/bin/kustomize
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/sandcastle"]
CMD ["serve"]
