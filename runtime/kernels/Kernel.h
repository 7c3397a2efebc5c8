//===- Kernel.h - The kernel registry's contract ------------------*- C++ -*-===//
//
// Every op of the plan format's op table (runtime/OpTable.h) has a
// `KernelDef`: a `verify` function that checks an instruction's operands at
// plan-load time (so kernels can trust their inputs) and a `bind` function
// that turns the instruction into a prepared call on arena pointers. The
// operand counts are the op table's, checked before `verify` runs. The
// executor's hot loop only runs the prepared calls.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELS_KERNEL_H
#define LOOM_RUNTIME_KERNELS_KERNEL_H

#include "runtime/OpView.h"
#include "runtime/plan.pb.h"
#include "runtime/support/MemoryLedger.h"
#include "runtime/support/Status.h"

#include <functional>
#include <string_view>
#include <vector>

namespace loom::runtime {

class Communicator;
class Device;
class InFlightBuckets;

/// What a running step tells the kernels.
struct StepContext {
  int64_t step = 0; // 0-based; AdamW uses t = step + 1
};

/// A prepared call: all pointers and sizes resolved at bind time.
using KernelFn = std::function<Status(const StepContext &)>;

/// What `bind` may ask of the executor.
class BindContext {
public:
  virtual ~BindContext() = default;
  /// Start of the program's arena.
  virtual uint8_t *arena() = 0;
  /// The communicator of the ranks that differ from this one only in `axes`
  /// (mesh axis indices, sorted).
  virtual Communicator *commForAxes(const std::vector<int64_t> &axes) = 0;
  /// The device the kernel runs on (then `arena()` is device memory), or
  /// null for the host.
  virtual Device *device() { return nullptr; }
  /// Where `all_reduce_start` leaves its bucket's collective for
  /// `all_reduce_wait` (null: the program cannot overlap collectives).
  virtual InFlightBuckets *inFlightBuckets() { return nullptr; }
  /// Host scratch for what a kernel keeps only during one call (a
  /// collective's packed blocks, attention's probabilities, im2col
  /// columns), shared by the program's instructions, as they run one at a
  /// time: `slot` 0 or 1 (two at once in one call), grown here to at least
  /// `bytes`. A kernel reads its `data()` when it runs, since a later bind
  /// may grow it. By default, one of its own.
  virtual std::shared_ptr<CountedVector<uint8_t>> sharedScratch(int slot,
                                                                int64_t bytes) {
    return std::make_shared<CountedVector<uint8_t>>(static_cast<size_t>(bytes));
  }

  /// Where buffer `b`'s bytes are: in the arena at its offset, unless a
  /// wrapper rebinds the buffer elsewhere (the CPU backend runs kernels of
  /// bf16 buffers on fp32 scratch copies).
  virtual uint8_t *bytes(const plan::Buffer *b) {
    return arena() + b->offset();
  }

  float *f32(const plan::Buffer *b) {
    return reinterpret_cast<float *>(bytes(b));
  }
  int64_t *i64(const plan::Buffer *b) {
    return reinterpret_cast<int64_t *>(bytes(b));
  }
  /// BF16 buffers hold the upper 16 bits of the f32 value.
  uint16_t *bf16(const plan::Buffer *b) {
    return reinterpret_cast<uint16_t *>(bytes(b));
  }
};

/// A backend's kernel of one op of the op table, which holds its operand
/// counts.
struct KernelDef {
  std::string_view name;
  /// Checks dtypes, shapes and attributes; the message needs no location.
  Status (*verify)(const OpView &op);
  StatusOr<KernelFn> (*bind)(const OpView &op, BindContext &ctx);
};

/// The CPU kernel of op `name`, or null for an unknown op.
const KernelDef *findKernel(std::string_view name);
/// The name of every op the CPU registry binds, so tests can hold the
/// registry against the op table.
std::vector<std::string_view> cpuKernelNames();

} // namespace loom::runtime

#endif // LOOM_RUNTIME_KERNELS_KERNEL_H
