# Sandcastle's image: a static-enough release build on a distroless base, running as the non-root
# user the Helm chart expects (65532). Built without the `demo` feature: the image holds no GitHub
# stand-in and no test key.
#   docker build -t REGISTRY/sandcastle:0.1.0 . && docker push REGISTRY/sandcastle:0.1.0
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --no-default-features --bin sandcastle

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/sandcastle /usr/local/bin/sandcastle
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/sandcastle"]
CMD ["serve"]
