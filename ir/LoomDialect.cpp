//===- LoomDialect.cpp - The loom dialect -----------------------*- C++ -*-===//

#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"
#include "ir/sharding/LoopNest.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::loom;

#include "ir/LoomDialect.cpp.inc"

void LoomDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/LoomOps.cpp.inc"
      >();
  sharding::attachShardingModels(getContext());
}

namespace {

/// "expected NAME to be WHAT" unless `value` is an `AttrT`.
template <typename AttrT>
LogicalResult expectKind(Operation *op, NamedAttribute attr, StringRef what) {
  if (isa<AttrT>(attr.getValue()))
    return success();
  return op->emitError("'") << attr.getName().getValue() << "' must be "
                            << what << ", got " << attr.getValue();
}

/// The roles of an argument (`result` false) or of a result.
LogicalResult verifyRole(Operation *op, NamedAttribute attr,
                         DictionaryAttr all, bool result) {
  StringRef name = attr.getName().getValue();
  if (name == attr::kParam || name == attr::kState ||
      name == attr::kRunningMean || name == attr::kRunningVar ||
      (!result && name == attr::kInput) || (result && name == attr::kOutput) ||
      (result && name == attr::kGrad)) {
    if (failed(expectKind<StringAttr>(op, attr, "a string")))
      return failure();
    if (name == attr::kState && !all.get(attr::kParam))
      return op->emitError("'loom.state' needs the 'loom.param' it belongs to");
    return success();
  }
  if (!result && name == attr::kInitializer) {
    if (failed(expectKind<StringAttr>(op, attr, "a string")))
      return failure();
    if (!all.get(attr::kParam) || all.get(attr::kState))
      return op->emitError("'loom.initializer' belongs on a 'loom.param' "
                           "argument");
    return success();
  }
  if (!result && name == attr::kSplitAxes) {
    auto dims = dyn_cast<ArrayAttr>(attr.getValue());
    if (!dims || !llvm::all_of(dims, [](Attribute a) {
          return isa<DenseI64ArrayAttr>(a);
        }))
      return op->emitError("'loom.split_axes' must be a list of mesh axis "
                           "lists (array<i64>), one per dimension");
    return success();
  }
  if (!result && name == attr::kFusedBlocks) {
    auto blocks = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!blocks || blocks.size() != 2 || blocks[0] < 0 || blocks[1] < 2 ||
        !all.get(attr::kParam) || all.get(attr::kState))
      return op->emitError("'loom.fused_blocks' belongs on a 'loom.param' "
                           "argument, as array<i64: DIM, BLOCKS> with "
                           "BLOCKS >= 2");
    return success();
  }
  if (!result && name == attr::kSampleOffset) {
    auto offset = dyn_cast<IntegerAttr>(attr.getValue());
    if (!offset || offset.getInt() < 0 ||
        !(all.get(attr::kInput) || all.get(attr::kTarget)))
      return op->emitError("'loom.sample_offset' belongs on a 'loom.input' "
                           "or 'loom.target' argument, as an integer >= 0");
    return success();
  }
  if (name == attr::kOnnxType) {
    auto type = dyn_cast<StringAttr>(attr.getValue());
    if (!type || !llvm::is_contained(kBoundaryTypes, type.getValue()) ||
        !all.get(result ? attr::kOutput : attr::kInput))
      return op->emitError("'loom.onnx_type' belongs on a 'loom.input' "
                           "argument or a 'loom.output' result, as one of "
                           "\"bool\", \"int8\", \"uint8\", \"int16\", "
                           "\"uint16\", \"int32\", \"uint32\", \"uint64\", "
                           "\"float16\", \"bfloat16\" or \"float64\"");
    return success();
  }
  if ((!result && name == attr::kTarget) || (result && name == attr::kLoss))
    return expectKind<UnitAttr>(op, attr, "a unit attribute");
  return op->emitError("'")
         << name << "' is not a role of a function "
         << (result ? "result (loom.output, loom.loss, loom.grad, "
                      "loom.param, loom.state, loom.running_mean, "
                      "loom.running_var, loom.onnx_type)"
                    : "argument (loom.param, loom.initializer, loom.input, "
                      "loom.target, loom.state, loom.running_mean, "
                      "loom.running_var, loom.split_axes, loom.fused_blocks, "
                      "loom.sample_offset, loom.onnx_type)");
}

} // namespace

LogicalResult LoomDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  DictionaryAttr all = func ? func.getArgAttrDict(argIndex) : DictionaryAttr();
  return verifyRole(op, attr, all ? all : DictionaryAttr::get(getContext()),
                    /*result=*/false);
}

LogicalResult LoomDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  DictionaryAttr all =
      func ? func.getResultAttrDict(resultIndex) : DictionaryAttr();
  return verifyRole(op, attr, all ? all : DictionaryAttr::get(getContext()),
                    /*result=*/true);
}

LogicalResult LoomDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == MeshAxesAttrHelper::getNameStr()) {
    auto grid = dyn_cast<shard::GridOp>(op);
    auto names = dyn_cast<ArrayAttr>(attr.getValue());
    if (!grid || !names)
      return op->emitError("'loom.mesh_axes' belongs on a shard.grid, as a "
                           "list of axis names");
    if (static_cast<int64_t>(names.size()) != grid.getRank() ||
        !llvm::all_of(names, [](Attribute a) { return isa<StringAttr>(a); }))
      return op->emitError("'loom.mesh_axes' must name each of the ")
             << grid.getRank() << " mesh axes, got " << names;
    return success();
  }
  if (name == ModelPathAttrHelper::getNameStr())
    return expectKind<StringAttr>(op, attr, "a string");
  if (name == TiedAttrHelper::getNameStr()) {
    // {copy = {of = "parameter", transposed}}: an initializer that the
    // importer read as (the transpose of) a parameter.
    auto tied = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!tied || !isa<ModuleOp>(op))
      return op->emitError("'loom.tied' belongs on the module, as a "
                           "dictionary of initializer names");
    for (NamedAttribute entry : tied) {
      auto tie = dyn_cast<DictionaryAttr>(entry.getValue());
      if (!tie || !tie.getAs<StringAttr>("of") ||
          llvm::any_of(tie, [](NamedAttribute f) {
            return f.getName() != "of" &&
                   !(f.getName() == "transposed" && isa<UnitAttr>(f.getValue()));
          }))
        return op->emitError("'loom.tied' entry '")
               << entry.getName().getValue()
               << "' must be {of = \"PARAMETER\"[, transposed]}, got "
               << entry.getValue();
    }
    return success();
  }
  if (name == NumMicroBatchesAttrHelper::getNameStr()) {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<shard::GridOp>(op) || !value || value.getInt() < 1)
      return op->emitError("'")
             << name << "' belongs on the shard.grid, as an integer >= 1, got "
             << attr.getValue();
    return success();
  }
  if (name == PipelineAttrHelper::getNameStr()) {
    auto pipeline = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!isa<shard::GridOp>(op) || !pipeline ||
        !pipeline.getAs<StringAttr>("schedule") ||
        !pipeline.getAs<ArrayAttr>("layers") ||
        !pipeline.getAs<ArrayAttr>("order"))
      return op->emitError("'")
             << name
             << "' belongs on the shard.grid, as {schedule, layers, order, "
                "...}, got "
             << attr.getValue();
    return success();
  }
  if (name == RematAttrHelper::getNameStr()) {
    auto remat = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!isa<func::FuncOp>(op) || !remat || !remat.getAs<StringAttr>("mode"))
      return op->emitError("'")
             << name << "' belongs on a func.func, as {mode, ...}, got "
             << attr.getValue();
    return success();
  }
  if (name == RecomputedAttrHelper::getNameStr() ||
      name == BackwardAttrHelper::getNameStr())
    return expectKind<UnitAttr>(op, attr, "a unit attribute");
  if (name == TagAttrHelper::getNameStr()) {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<shard::SendOp, shard::RecvOp>(op) || !value ||
        value.getInt() < 0 || value.getInt() > 32767)
      return op->emitError("'")
             << name
             << "' belongs on a shard.send or shard.recv, as an integer in "
                "[0, 32767], got "
             << attr.getValue();
    return success();
  }
  if (name == PipelineDeviceAttrHelper::getNameStr()) {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<func::FuncOp>(op) || !value || value.getInt() < 0)
      return op->emitError("'")
             << name << "' belongs on a func.func, as an integer >= 0, got "
             << attr.getValue();
    return success();
  }
  if (name == OpsetAttrHelper::getNameStr() || name == StageAttrHelper::getNameStr() ||
      name == MicroBatchAttrHelper::getNameStr() ||
      name == RecomputeAttrHelper::getNameStr() ||
      name == ZeroStageAttrHelper::getNameStr()) {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    int64_t max = name == ZeroStageAttrHelper::getNameStr() ? 3 : INT64_MAX;
    if (!value || value.getInt() < 0 || value.getInt() > max)
      return op->emitError("'")
             << name << "' must be an integer in [0, "
             << (max == INT64_MAX ? std::string("inf") : std::to_string(max))
             << "], got " << attr.getValue();
    return success();
  }
  return op->emitError("unknown attribute '") << name << "'";
}
