//===- Bf16.cpp - bf16 storage around the fp32 CPU kernels ------*- C++ -*-===//

#include "runtime/kernels/cpu/Bf16.h"

#include "runtime/Plan.h"
#include "runtime/kernels/cpu/CpuKernels.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <map>
#include <memory>

namespace loom::runtime::cpu {

void widenBf16(const uint16_t *src, float *dst, int64_t n) {
  forRanges(n, kParallelThreshold, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      dst[i] = bf16ToFloat(src[i]);
  });
}

void narrowToBf16(const float *src, uint16_t *dst, int64_t n) {
  forRanges(n, kParallelThreshold, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      dst[i] = floatToBf16(src[i]);
  });
}

bool isBf16Native(std::string_view op) {
  // The block movers copy bytes of any element type (a gather bucket's too:
  // its start and wait run apart, so they could not be widened anyway).
  return op == "convert" || op == "copy" || op == "all_slice" ||
         op == "all_gather" || op == "all_gather_start" ||
         op == "all_gather_wait" || op == "all_to_all" || op == "send" ||
         op == "recv";
}

bool touchesBf16(const OpView &op) {
  for (const auto *list : {&op.inputs, &op.outputs})
    for (const plan::Buffer *b : *list)
      if (b->dtype() == plan::BF16)
        return true;
  return false;
}

namespace {

bool isOptimizerUpdate(std::string_view op) {
  return op == "adamw" || op == "sgd";
}

/// Scratch floats are laid out in 64-byte steps, like the arena.
constexpr int64_t kAlignFloats = 16;

/// An instruction's fp32 view: every BF16 operand buffer replaced by an F32
/// copy that lives in the scratch block.
struct WidenedOp {
  struct Slot {
    const plan::Buffer *original;
    const plan::Buffer *copy;
    int64_t scratchOffset; // in floats
    int64_t numel;
    bool read, written;
  };
  std::vector<plan::Buffer> copies; // stable: reserved before filling
  std::vector<Slot> slots;
  int64_t floats = 0;
  OpView view;

  explicit WidenedOp(const OpView &op) : view{op.plan, op.inst, {}, {}} {
    std::map<int32_t, size_t> slotOf;
    size_t operands = op.inputs.size() + op.outputs.size();
    copies.reserve(operands);
    auto widen = [&](const plan::Buffer *b, bool isInput) {
      if (b->dtype() != plan::BF16)
        return b;
      auto it = slotOf.find(b->id());
      if (it == slotOf.end()) {
        plan::Buffer &copy = copies.emplace_back(*b);
        int64_t numel = numElements(bufferShape(*b));
        copy.set_dtype(plan::F32);
        copy.set_size_bytes(numel * static_cast<int64_t>(sizeof(float)));
        copy.clear_init();
        slots.push_back({b, &copy, floats, numel, false, false});
        floats += (numel + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
        it = slotOf.emplace(b->id(), slots.size() - 1).first;
      }
      Slot &slot = slots[it->second];
      (isInput ? slot.read : slot.written) = true;
      return slot.copy;
    };
    for (const plan::Buffer *b : op.inputs)
      view.inputs.push_back(widen(b, true));
    for (const plan::Buffer *b : op.outputs)
      view.outputs.push_back(widen(b, false));
  }
};

/// Binds a kernel on a `WidenedOp`: the copies' bytes are in the scratch
/// block, everything else is where the outer context says.
class ScratchContext final : public BindContext {
public:
  ScratchContext(BindContext &outer, const WidenedOp &op, float *scratch)
      : outer(outer), op(op), scratch(scratch) {}
  uint8_t *arena() override { return outer.arena(); }
  Communicator *commForAxes(const std::vector<int64_t> &axes) override {
    return outer.commForAxes(axes);
  }
  Device *device() override { return outer.device(); }
  std::shared_ptr<CountedVector<uint8_t>> sharedScratch(int slot,
                                                        int64_t bytes) override {
    return outer.sharedScratch(slot, bytes);
  }
  uint8_t *bytes(const plan::Buffer *b) override {
    for (const WidenedOp::Slot &slot : op.slots)
      if (slot.copy == b)
        return reinterpret_cast<uint8_t *>(scratch + slot.scratchOffset);
    return outer.bytes(b);
  }

private:
  BindContext &outer;
  const WidenedOp &op;
  float *scratch;
};

bool needsWidening(const OpView &op) {
  return touchesBf16(op) && !isBf16Native(op.inst.op());
}

} // namespace

int64_t Bf16Scratch::floatsFor(const OpView &op) {
  return needsWidening(op) ? WidenedOp(op).floats : 0;
}

void Bf16Scratch::reserve(int64_t floats) {
  if (floats > size())
    storage.resize(static_cast<size_t>(floats));
}

Status verifyOnCpu(const KernelDef &kernel, const OpView &op) {
  if (!needsWidening(op))
    return kernel.verify(op);
  if (isOptimizerUpdate(op.inst.op()))
    for (const auto *list : {&op.inputs, &op.outputs})
      for (const plan::Buffer *b : *list)
        if (b->dtype() == plan::BF16)
          return makeError("buffer %d '%s' is bf16, but %s updates f32 "
                           "master weights: parameters, gradients and "
                           "optimizer state must be f32",
                           b->id(), b->name().c_str(), op.inst.op().c_str());
  WidenedOp widened(op);
  return kernel.verify(widened.view);
}

StatusOr<KernelFn> bindOnCpu(const KernelDef &kernel, const OpView &op,
                             BindContext &ctx, Bf16Scratch &scratch) {
  if (!needsWidening(op))
    return kernel.bind(op, ctx);
  auto widened = std::make_shared<WidenedOp>(op);
  if (widened->floats > scratch.size())
    return makeError("internal error: bf16 scratch of %lld floats is smaller "
                     "than the %lld this instruction needs",
                     (long long)scratch.size(), (long long)widened->floats);
  ScratchContext inner(ctx, *widened, scratch.data());
  StatusOr<KernelFn> fn = kernel.bind(widened->view, inner);
  if (!fn.isOk())
    return fn.status();

  struct Copy {
    uint16_t *arena;
    float *scratch;
    int64_t n;
  };
  std::vector<Copy> widen, narrow;
  for (const WidenedOp::Slot &slot : widened->slots) {
    Copy c{ctx.bf16(slot.original), scratch.data() + slot.scratchOffset,
           slot.numel};
    if (slot.read)
      widen.push_back(c);
    if (slot.written)
      narrow.push_back(c);
  }
  return KernelFn([call = std::move(fn).value(), widen, narrow,
                   keep = widened](const StepContext &step) -> Status {
    for (const Copy &c : widen)
      widenBf16(c.arena, c.scratch, c.n);
    LOOM_RETURN_IF_ERROR(call(step));
    for (const Copy &c : narrow)
      narrowToBf16(c.scratch, c.arena, c.n);
    return Status::ok();
  });
}

} // namespace loom::runtime::cpu
