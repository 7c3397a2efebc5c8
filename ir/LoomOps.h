//===- LoomOps.h - loom dialect operations ----------------------*- C++ -*-===//

#ifndef LOOM_IR_LOOMOPS_H
#define LOOM_IR_LOOMOPS_H

#include "ir/LoomDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

namespace mlir::loom::trait {
namespace impl {
LogicalResult verifySameFloatOperandElementType(Operation *op);
} // namespace impl

/// All float tensor operands of the op have one element type (f32 or bf16);
/// integer operands are not constrained.
template <typename ConcreteType>
class SameFloatOperandElementType
    : public ::mlir::OpTrait::TraitBase<ConcreteType,
                                        SameFloatOperandElementType> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return impl::verifySameFloatOperandElementType(op);
  }
};
} // namespace mlir::loom::trait

#define GET_OP_CLASSES
#include "ir/LoomOps.h.inc"

namespace mlir::loom {

/// Names of the argument and result attributes that give a value its role in
/// a training step (see the dialect description).
namespace attr {
// The roles, named by the dialect's discardable attributes (LoomDialect.td).
inline constexpr llvm::StringLiteral kParam = LoomDialect::ParamAttrHelper::getNameStr();
// The ONNX initializer a parameter starts from, when not its own name.
inline constexpr llvm::StringLiteral kInitializer = LoomDialect::InitializerAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kInput = LoomDialect::InputAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kTarget = LoomDialect::TargetAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kOutput = LoomDialect::OutputAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kLoss = LoomDialect::LossAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kGrad = LoomDialect::GradAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kState = LoomDialect::StateAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kRunningMean = LoomDialect::RunningMeanAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kRunningVar = LoomDialect::RunningVarAttrHelper::getNameStr();
// The module's model: its file, opset, and initializers that are copies of
// parameters.
inline constexpr llvm::StringLiteral kModelPath = LoomDialect::ModelPathAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kOpset = LoomDialect::OpsetAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kTied = LoomDialect::TiedAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kSplitAxes = LoomDialect::SplitAxesAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kFusedBlocks = LoomDialect::FusedBlocksAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kSampleOffset = LoomDialect::SampleOffsetAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kOnnxType = LoomDialect::OnnxTypeAttrHelper::getNameStr();
} // namespace attr

/// The ONNX element types a graph input or output may have that the program
/// holds in float32 or int64 (`loom.onnx_type`).
inline constexpr llvm::StringLiteral kBoundaryTypes[] = {
    "bool",   "int8",   "uint8",   "int16",    "uint16", "int32",
    "uint32", "uint64", "float16", "bfloat16", "float64"};

/// The operand of `op` that only gives its result's shape (the `like` of
/// sum_to, broadcast_like, slice_grad, gather_grad and the convolution
/// gradients), which kernels never read; none for other ops.
std::optional<unsigned> shapeOnlyOperand(Operation *op);

/// Shape of the result of a `loom.reshape` of `input` with the ONNX shape
/// specification `spec` (`0` copies, one `-1` infers), or failure with a
/// reason in `why`.
FailureOr<SmallVector<int64_t>> inferReshape(ArrayRef<int64_t> input,
                                             ArrayRef<int64_t> spec,
                                             std::string &why);

/// A specification equivalent to reshaping `input` to `output` that keeps
/// leading dimensions equal in both as `0`, so the reshape still applies when
/// the batch dimension changes.
SmallVector<int64_t> batchAgnosticReshapeSpec(ArrayRef<int64_t> input,
                                              ArrayRef<int64_t> output);

/// What a reduce-scatter or all-gather bucket's start
/// (`loom.reduce_scatter_start`, `loom.all_gather_start`) says.
struct BlockBucket {
  bool scatter = false;
  ArrayRef<int16_t> axes;
  ArrayRef<int64_t> dims;
  int64_t bucket = 0;
};
/// The bucket `start` starts; `start` must be one of those two ops.
BlockBucket blockBucketOf(Operation *start);

} // namespace mlir::loom

#endif // LOOM_IR_LOOMOPS_H
