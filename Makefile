# Loom: the two commands a new user needs (see README.md).
#   make demo   - install what is missing, build, train a small model on 4 CPU ranks
#   make check  - install what is missing, build, run every test suite

BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: demo check build deps

deps:
	@bash scripts/install-deps.sh

build: deps
	@mkdir -p $(BUILD)
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit >$(BUILD)/configure.log 2>&1 \
	  || { cat $(BUILD)/configure.log; exit 1; }
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@bash examples/demo.sh $(BUILD)

check: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
