#!/bin/sh
# An `http` step against a loopback server versus a bare reqwest request
# loop against the same server (see docs/performance.md#http-steps): N
# requests (HTTP_BENCH_N, default 200) as a bare loop (one block_on, and one
# block_on per request), through the `http` tool in process, and as the
# marginal cost per step of whole runs of GET, read_file, POST and flaky
# steps; the ways alternate round by round (HTTP_BENCH_ROUNDS, default 5,
# best of each); prints µs per request or step and the ratios to the bare
# loop. HTTP_BENCH_ADDRESS=127.0.0.1:PORT sends every way to a server in
# another process (answering /api/items with the fixture's 17 bytes).
set -eu
cd "$(dirname "$0")/../.."
HTTP_BENCH_N="${HTTP_BENCH_N:-200}" cargo test --release --test main http_bench::http_bench -- --ignored --nocapture 2>&1 | grep '^http:'
