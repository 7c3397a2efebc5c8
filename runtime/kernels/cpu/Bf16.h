//===- Bf16.h - bf16 storage around the fp32 CPU kernels --------*- C++ -*-===//
//
// Mixed-precision plans store activations as BF16 buffers. The CPU backend
// computes in fp32: `convert`, `copy` and the byte movers (`all_slice`,
// `all_gather`, `all_to_all`) handle bf16 themselves; every other
// instruction that touches a BF16 buffer is bound through a wrapper that
// widens its bf16 operands into fp32 scratch, runs the fp32 kernel there and
// rounds its bf16 outputs back to nearest even. So on CPU, bf16 is storage
// (and the memory plan), not arithmetic: results match a bf16-storage,
// fp32-compute device (PyTorch autocast with fp32 accumulation).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELS_CPU_BF16_H
#define LOOM_RUNTIME_KERNELS_CPU_BF16_H

#include "runtime/kernels/Kernel.h"
#include "runtime/support/HostTensor.h"
#include "runtime/support/MemoryLedger.h"

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace loom::runtime::cpu {

// The bf16 rounding and widening (runtime/support/HostTensor.h).
using runtime::bf16ToFloat;
using runtime::floatToBf16;

/// `dst[i] = bf16ToFloat(src[i])` for `i < n` (OpenMP threads when large).
void widenBf16(const uint16_t *src, float *dst, int64_t n);
/// `dst[i] = floatToBf16(src[i])` for `i < n` (OpenMP threads when large).
void narrowToBf16(const float *src, uint16_t *dst, int64_t n);

/// Whether the kernel of `op` reads and writes BF16 buffers itself.
bool isBf16Native(std::string_view op);
/// Whether the instruction reads or writes a BF16 buffer.
bool touchesBf16(const OpView &op);

/// fp32 scratch for the widened operands. Instructions run one at a time, so
/// one block as large as the largest instruction's bf16 operands serves the
/// whole program; it is sized before any instruction is bound.
class Bf16Scratch {
public:
  /// Floats that the widened operands of `op` occupy (0 when the op runs
  /// without widening).
  static int64_t floatsFor(const OpView &op);
  /// Grows the block to at least `floats`; only before binding.
  void reserve(int64_t floats);
  float *data() { return storage.data(); }
  int64_t size() const { return static_cast<int64_t>(storage.size()); }

private:
  CountedVector<float> storage;
};

/// Checks `op` for the CPU backend: BF16 buffers only where the op allows
/// them (never for optimizer updates, whose parameters, gradients and state
/// are f32 master copies), then the kernel's own `verify` on the fp32 view
/// that the wrapper binds.
Status verifyOnCpu(const KernelDef &kernel, const OpView &op);

/// Binds `op` on the host arena: directly, or, when it touches BF16 buffers
/// and its kernel is fp32-only, on fp32 copies in `scratch` that are widened
/// before each call and rounded back (outputs) after it. Buffers that are
/// both read and written (in place) are widened too.
StatusOr<KernelFn> bindOnCpu(const KernelDef &kernel, const OpView &op,
                             BindContext &ctx, Bf16Scratch &scratch);

} // namespace loom::runtime::cpu

#endif // LOOM_RUNTIME_KERNELS_CPU_BF16_H
