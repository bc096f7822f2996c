# The two commands of the README are `make run` and `make test`; everything
# else here is what they are made of. Every target installs what it needs and
# is quick when it is already there.
SHELL := /bin/bash
.DEFAULT_GOAL := run

EXAMPLE ?= examples/hello.yaml

.PHONY: run test plugin-tests toolchain guests host lint bench clean-guests

## Install the guest toolchain (rustup wasm32 target if present, else Debian's rustc-web) and wasm-tools.
toolchain:
	@bash .ci/guest-toolchain.sh

## Build every Wasm component (plugins and test guests) from source into target/plugins and target/test-guests.
guests: toolchain
	@bash .ci/build-guests.sh

## Build the host.
host:
	cargo build --locked -p weft

## The main job: a workflow end to end on the embedded dev cluster.
run: guests host
	cargo run --locked -q -p weft -- run $(EXAMPLE)

## The whole test suite.
test: guests
	cargo fmt --all --check
	cargo clippy --locked --workspace --all-targets -- -D warnings
	cargo test --locked --workspace
	$(MAKE) plugin-tests

## The first-party plugins' own logic, natively (the host's tests run the components).
plugin-tests:
	cd plugins && cargo fmt --all --check
	cd plugins && CARGO_TARGET_DIR=target-native cargo test --locked -q $(addprefix -p weft-plugin-,auth-token request-id rate-limit audit)

## Benchmarks (not part of `make test`): figures go to docs/benchmarks.md.
bench: guests
	cargo bench --locked -p weft-plugin

clean-guests:
	rm -rf plugins/target target/plugins target/test-guests
