# Sandcastle's image: a release build of the server (the `sandcastle` crate, which holds no
# GitHub stand-in and no test key) on a distroless base, running as the non-root user the Helm
# chart expects (65532).
#   docker build -t REGISTRY/sandcastle:0.1.0 . && docker push REGISTRY/sandcastle:0.1.0
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p sandcastle --bin sandcastle

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/sandcastle /usr/local/bin/sandcastle
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/sandcastle"]
CMD ["serve"]
