# Loom: the two commands a new user needs (see README.md).
#   make demo   - install what is missing, build, train a small model on 4 CPU ranks
#   make check  - install what is missing, build, run every test suite
#   make fuzz   - build the fuzz targets with clang, ASan and UBSan in $(FUZZ_BUILD)
#                 and run each for FUZZ_SECONDS (docs/hardening.md)
#   make check-asan - build with clang, UBSan and ASan in $(ASAN_BUILD)
#                 and run the unit and lit suites and the hostile-input e2e tests

BUILD ?= build
JOBS ?= $(shell nproc)
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 600
ASAN_BUILD ?= build-asan
# Open MPI and the BLAS leak at exit by design: leaks are not what this finds.
# allow_user_poisoning=0: LLVM's allocator poisons its slabs itself, in the
# inlined header code of our (instrumented) files, while Debian's
# uninstrumented MLIR libraries write to them: every MLIRContext would report
# a false use-after-poison (docs/hardening.md).
ASAN_ENV = ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:detect_container_overflow=0:allow_user_poisoning=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: demo check build deps fuzz check-asan

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

fuzz:
	@bash scripts/install-deps.sh --fuzz
	@mkdir -p $(FUZZ_BUILD)
	@cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
	  -DLOOM_FUZZ=ON -DLOOM_ENABLE_CUDA=OFF \
	  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit >$(FUZZ_BUILD)/configure.log 2>&1 \
	  || { cat $(FUZZ_BUILD)/configure.log; exit 1; }
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target loom-fuzz
	@bash test/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

check-asan:
	@bash scripts/install-deps.sh --fuzz
	@mkdir -p $(ASAN_BUILD)
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
	  -DLOOM_SANITIZE=ON -DLOOM_ENABLE_CUDA=OFF \
	  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit >$(ASAN_BUILD)/configure.log 2>&1 \
	  || { cat $(ASAN_BUILD)/configure.log; exit 1; }
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && $(ASAN_ENV) ctest --output-on-failure -j $(JOBS) -L 'unit|lit|hostile' \
	  -E compiler.loomc_links_no_runtime
