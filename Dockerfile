# tokentriage container image: Debian bookworm, two stages.
#   docker build -t tokentriage:0.1.0 .
# The build stage compiles with Debian's -dev packages (scripts/deps.sh's build group; no test
# tools); the runtime stage holds only the shared libraries the binary links, the binary, the
# client library and /usr/share/doc/tokentriage (the license, the notice, the changelog), and
# runs as the unprivileged user 65532 (the DaemonSet's runAsUser).
FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config \
      libuv1-dev libmsgpack-dev libyaml-dev libsodium-dev libhiredis-dev libhttp-parser-dev \
      libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The commit tokentriage_build_info reports (no git in this stage):
#   docker build --build-arg TT_COMMIT=$(git rev-parse --short=12 HEAD) ...
ARG TT_COMMIT=unknown
# The build type the test suite runs (the project's default, RelWithDebInfo), stripped on
# install. Warnings are errors in CI, not here: the image build does not re-judge the code.
RUN cmake -S . -B /build -DTT_TESTS=OFF -DTT_COMMIT="$TT_COMMIT" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib \
 && cmake --build /build -j"$(nproc)" \
 && DESTDIR=/install cmake --install /build --strip \
 && mkdir -p /rootfs/usr/bin /rootfs/usr/lib /rootfs/usr/share/doc \
 && cp /install/usr/bin/tokentriage /rootfs/usr/bin/ \
 && cp -a /install/usr/share/doc/tokentriage /rootfs/usr/share/doc/ \
 && cp -a /install/usr/lib/libtokentriage.so* /rootfs/usr/lib/

FROM debian:bookworm-slim
# Runtime libraries only: one package per library the binary links (tests/packaging checks this
# list against the binary's NEEDED entries).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libuv1 libyaml-0-2 libsodium23 libhiredis0.14 libhttp-parser2.9 libnghttp2-14 \
      libprotobuf-c1 libssl3 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 tokentriage \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin tokentriage \
 && mkdir -p /var/lib/tokentriage \
 && chown 65532:65532 /var/lib/tokentriage \
 && chmod 0700 /var/lib/tokentriage
COPY --from=build /rootfs/ /
RUN ldconfig
USER 65532:65532
# 7946 gossip (UDP and TCP), 9464 /metrics /healthz /readyz, 8081 Envoy's rate limit service
# (server.grpc, when the config sets it); the socket lives in /run/tokentriage, a volume shared
# with the workloads (hostPath on Kubernetes).
EXPOSE 7946/udp 7946/tcp 9464/tcp 8081/tcp
# server.state_dir: the counters' snapshot (docs/state.md). A volume, so it outlives the
# container; owned by the daemon's user when the image creates it.
VOLUME /var/lib/tokentriage
ENTRYPOINT ["tokentriage"]
CMD ["serve", "-c", "/etc/tokentriage/tokentriage.yaml"]
