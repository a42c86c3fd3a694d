#!/bin/sh
# Redaction throughput: 1 MiB and 4 MiB of step output with 5 secrets
# (see docs/performance.md#redaction). Prints MB/s for each size.
set -eu
cd "$(dirname "$0")/../.."
cargo test --release --test main secrets::redaction_bench -- --ignored --nocapture 2>&1 | grep '^redact:'
