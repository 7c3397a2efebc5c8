//===- OpView.h - An instruction, operands resolved -------------*- C++ -*-===//
//
// What plan validation, the workspace formulas and every backend's kernels
// read an instruction through. Attribute readers follow the plan emitter's
// conventions (unit attributes are `i = 1` when set and absent otherwise),
// so that the kernels and `loomc`'s memory proof read attributes alike.
// Part of `LoomPlanFormat`: no kernel, BLAS or OpenMP behind it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_OPVIEW_H
#define LOOM_RUNTIME_OPVIEW_H

#include "runtime/plan.pb.h"
#include "runtime/support/Status.h"

#include <optional>
#include <string>
#include <vector>

namespace loom::runtime {

/// An instruction with its operand buffers resolved.
struct OpView {
  const plan::Plan &plan;
  const plan::Instruction &inst;
  std::vector<const plan::Buffer *> inputs;
  std::vector<const plan::Buffer *> outputs;

  std::vector<int64_t> inShape(size_t i) const;
  std::vector<int64_t> outShape(size_t i) const;
  int64_t inNumel(size_t i) const;
  int64_t outNumel(size_t i) const;

  /// A numeric attribute (`f` or `i`); `dflt` when absent, an error when
  /// absent without a default or of another kind.
  StatusOr<double> numAttr(const std::string &name,
                           std::optional<double> dflt = std::nullopt) const;
  /// A string attribute; `dflt` when absent.
  StatusOr<std::string>
  strAttr(const std::string &name,
          std::optional<std::string> dflt = std::nullopt) const;
  /// An `ints` attribute (required).
  StatusOr<std::vector<int64_t>> intsAttr(const std::string &name) const;

  /// Checks that every input and output has `dtype`.
  Status expectAllDType(plan::DType dtype) const;
  /// Checks that no output is also an input (ops that may not run in place).
  Status expectNotInPlace() const;
};

/// A unit attribute: absent means false; present must be 0 or 1.
StatusOr<bool> flagAttr(const OpView &op, const char *name);
/// An integer attribute (an `i`, or an `f` holding an integer).
StatusOr<int64_t> intAttr(const OpView &op, const char *name);
/// A normalised axis attribute in `[0, rank)` (negative counts from the end).
StatusOr<int64_t> axisAttr(const OpView &op, const char *name, int64_t rank);
/// An `ints` attribute of exactly `size` entries.
StatusOr<std::vector<int64_t>> intsAttrOfSize(const OpView &op,
                                              const char *name, size_t size);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_OPVIEW_H
