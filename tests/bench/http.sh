#!/bin/sh
# An `http` step against a loopback server versus a bare reqwest request
# loop against the same server (see docs/performance.md#http-steps): N GET
# requests (HTTP_BENCH_N, default 200) as a bare loop, through the `http`
# tool in process, and as a whole run of N `http` steps; prints µs per
# request and the ratios to the bare loop.
set -eu
cd "$(dirname "$0")/../.."
HTTP_BENCH_N="${HTTP_BENCH_N:-200}" cargo test --release --test main http_steps::http_bench -- --ignored --nocapture 2>&1 | grep '^http:'
