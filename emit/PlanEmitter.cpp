//===- PlanEmitter.cpp - Lowered IR to the serialized plan ------*- C++ -*-===//
//
// Walks one rank's lowered `@main` in program order: every SSA value becomes
// a buffer, every op an instruction (constants become initialised buffers,
// optimizer updates write their parameter and state buffers in place), and
// buffers get static arena offsets from their live ranges.
//
//===----------------------------------------------------------------------===//

#include "emit/PlanEmitter.h"
#include "ir/NodeName.h"
#include "emit/ArenaAssignment.h"
#include "emit/InitRules.h"
#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlir::loom;

/// The plan's name for a graph value's `loom.onnx_type` (none: as dtype).
static plan::IoType ioTypeOf(StringAttr onnxType) {
  if (!onnxType)
    return plan::IO_AS_DTYPE;
  return llvm::StringSwitch<plan::IoType>(onnxType.getValue())
      .Case("bool", plan::IO_BOOL)
      .Case("int8", plan::IO_I8)
      .Case("uint8", plan::IO_U8)
      .Case("int16", plan::IO_I16)
      .Case("uint16", plan::IO_U16)
      .Case("int32", plan::IO_I32)
      .Case("uint32", plan::IO_U32)
      .Case("uint64", plan::IO_U64)
      .Case("float16", plan::IO_F16)
      .Case("bfloat16", plan::IO_BF16)
      .Case("float64", plan::IO_F64)
      .Default(plan::IO_AS_DTYPE);
}

namespace {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max() / 2;

std::string describeLoc(Location loc) {
  if (StringRef name = onnxNodeName(loc); !name.empty())
    return name.str();
  std::string s;
  llvm::raw_string_ostream os(s);
  loc.print(os);
  return s;
}

class Emitter {
public:
  Emitter(func::FuncOp func, MemoryBreakdown &memory, bool storedWeights)
      : func(func), memory(memory), storedWeights(storedWeights) {}

  LogicalResult run(plan::Program &program);

private:
  FailureOr<int> newBuffer(Type t, plan::Role role, Location loc);
  FailureOr<int> newBuffer(Value v, plan::Role role, Location loc) {
    FailureOr<int> id = newBuffer(v.getType(), role, loc);
    if (failed(id))
      return id;
    buffers[v] = *id;
    // A tensor of a bucket has its place in the bucket's range.
    if (auto it = bucketSlots.find(v); it != bucketSlots.end()) {
      aliasOf[*id] = it->second.first;
      aliasOffset[*id] = it->second.second;
      ranges[*id].size = 0;
    }
    return id;
  }
  LogicalResult emitBuckets();
  int bufferOf(Value v) { return buffers.lookup(v); }
  LogicalResult emitArguments();

  LogicalResult emitOp(Operation *op);
  LogicalResult emitReturn(func::ReturnOp ret);
  LogicalResult emitTransfer(Operation *op);
  LogicalResult emitBlockStart(Operation *op);
  LogicalResult emitBlockWait(Operation *op);
  plan::Instruction &addInstruction(StringRef name, ArrayRef<Value> inputs,
                                    ArrayRef<int> outputs, Location loc);
  plan::Instruction &addInstruction(StringRef name, ArrayRef<int> inputs,
                                    ArrayRef<int> outputs, Location loc);
  /// The buffer whose bytes `id` shares (itself unless it is an alias).
  int root(int id) const { return aliasOf[id] < 0 ? id : aliasOf[id]; }
  void use(int buffer) {
    buffer = root(buffer);
    ranges[buffer].start = std::min(ranges[buffer].start, step());
    ranges[buffer].end = std::max(ranges[buffer].end, step());
  }
  int64_t step() const { return program->instructions_size(); }

  func::FuncOp func;
  MemoryBreakdown &memory;
  bool storedWeights;
  plan::Program *program = nullptr;
  DenseMap<Value, int> buffers;
  std::vector<LiveRange> ranges;
  /// For a reshape's result, the buffer it is a view of, and for a
  /// bucket's tensor the bucket's; -1 otherwise.
  std::vector<int> aliasOf;
  /// Byte offset of an alias in the buffer it is part of.
  std::vector<int64_t> aliasOffset;
  /// Each tensor of an all-reduce bucket: the bucket's buffer and the
  /// tensor's byte offset in it.
  DenseMap<Value, std::pair<int, int64_t>> bucketSlots;
  /// The bucket buffer of each `loom.all_reduce_start`'s bucket id.
  DenseMap<int64_t, int> bucketBuffers;
  /// The send and receive staging of each reduce-scatter or all-gather
  /// bucket.
  DenseMap<int64_t, std::pair<int, int>> blockStaging;
  /// The buffers sends read: they live to the end of the step.
  SmallVector<int> sent;
  /// The op being emitted (its pipeline marks go on its instructions).
  Operation *current = nullptr;
};

FailureOr<int> Emitter::newBuffer(Type t, plan::Role role, Location loc) {
  auto type = dyn_cast<RankedTensorType>(t);
  if (!type || !type.hasStaticShape())
    return emitError(loc, "cannot emit a buffer for a value of type ")
           << t << ": a static-shaped tensor is required";
  plan::Buffer *buf = program->add_buffers();
  int id = program->buffers_size() - 1;
  buf->set_id(id);
  int64_t elemBytes;
  if (type.getElementType().isF32()) {
    buf->set_dtype(plan::F32);
    elemBytes = 4;
  } else if (type.getElementType().isBF16()) {
    buf->set_dtype(plan::BF16);
    elemBytes = 2;
  } else if (type.getElementType().isInteger(64)) {
    buf->set_dtype(plan::I64);
    elemBytes = 8;
  } else {
    return emitError(loc, "cannot emit a buffer of element type ")
           << type.getElementType() << "; f32, bf16 and i64 are supported";
  }
  int64_t bytes = elemBytes;
  for (int64_t d : type.getShape()) {
    buf->add_shape(d);
    if (__builtin_mul_overflow(bytes, d, &bytes))
      return emitError(loc, "a tensor of type ")
             << type << " is too large to address (over 2^63 bytes)";
  }
  buf->set_size_bytes(bytes);
  buf->set_role(role);
  bool persistent = role == plan::PARAMETER || role == plan::OPTIMIZER_STATE ||
                    role == plan::RUNNING_STAT || role == plan::CONSTANT;
  bool data = role == plan::INPUT || role == plan::TARGET;
  LiveRange range;
  range.size = buf->size_bytes();
  range.start = (persistent || data) ? 0 : kForever;
  range.end = persistent ? kForever : 0;
  ranges.push_back(range);
  aliasOf.push_back(-1);
  aliasOffset.push_back(0);
  return id;
}

LogicalResult Emitter::emitArguments() {
  SmallVector<int64_t> meshShape;
  if (auto module = func->getParentOfType<ModuleOp>())
    if (auto grid = module.lookupSymbol<shard::GridOp>("mesh"))
      meshShape.assign(grid.getShape().begin(), grid.getShape().end());
  // Each fused parameter's `loom.fused_blocks`, which its optimizer state
  // (viewed alike) shares.
  DenseMap<StringAttr, DenseI64ArrayAttr> fusedBlocks;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto fused =
            func.getArgAttrOfType<DenseI64ArrayAttr>(i, attr::kFusedBlocks))
      fusedBlocks[func.getArgAttrOfType<StringAttr>(i, attr::kParam)] = fused;
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto param = func.getArgAttrOfType<StringAttr>(i, attr::kParam);
    auto state = func.getArgAttrOfType<StringAttr>(i, attr::kState);
    auto input = func.getArgAttrOfType<StringAttr>(i, attr::kInput);
    auto runningMean = func.getArgAttrOfType<StringAttr>(i, attr::kRunningMean);
    auto runningVar = func.getArgAttrOfType<StringAttr>(i, attr::kRunningVar);
    plan::Role role;
    if (runningMean || runningVar)
      role = plan::RUNNING_STAT;
    else if (state && param)
      role = plan::OPTIMIZER_STATE;
    else if (param)
      role = plan::PARAMETER;
    else if (input)
      role = plan::INPUT;
    else if (func.getArgAttr(i, attr::kTarget))
      role = plan::TARGET;
    else
      return func.emitError("argument #")
             << i
             << " has no role (loom.param, loom.input, loom.target, "
                "loom.running_mean or loom.running_var)";
    FailureOr<int> id = newBuffer(arg, role, arg.getLoc());
    if (failed(id))
      return failure();
    plan::Buffer *buf = program->mutable_buffers(*id);
    switch (role) {
    case plan::PARAMETER:
      buf->set_name(param.str());
      buf->set_binding(param.str());
      if (storedWeights) {
        auto from = func.getArgAttrOfType<StringAttr>(i, attr::kInitializer);
        buf->set_onnx_initializer(from ? from.str() : param.str());
      }
      *buf->mutable_init_rule() = chooseInitRule(arg);
      memory.parameters += buf->size_bytes();
      break;
    case plan::RUNNING_STAT: {
      // A batch norm's running statistic: from its initializer, or, planned
      // without weights, torch's initial values (mean 0, variance 1).
      StringAttr name = runningMean ? runningMean : runningVar;
      buf->set_name(name.str());
      buf->set_binding(name.str());
      buf->set_state(runningMean ? "running_mean" : "running_var");
      if (storedWeights)
        buf->set_onnx_initializer(name.str());
      buf->mutable_init_rule()->set_kind(runningMean ? plan::InitRule::ZEROS
                                                     : plan::InitRule::ONES);
      memory.parameters += buf->size_bytes();
      break;
    }
    case plan::OPTIMIZER_STATE:
      buf->set_name(param.str() + "." + state.str());
      buf->set_binding(param.str());
      buf->set_state(state.str());
      buf->set_zeros(true);
      memory.optimizerState += buf->size_bytes();
      break;
    case plan::INPUT:
      buf->set_name(input.str());
      buf->set_binding(input.str());
      buf->set_io_type(
          ioTypeOf(func.getArgAttrOfType<StringAttr>(i, attr::kOnnxType)));
      memory.data += buf->size_bytes();
      break;
    default:
      buf->set_name("target");
      buf->set_binding("target");
      memory.data += buf->size_bytes();
      break;
    }
    // One micro-batch of the rank's share (loom-unroll-micro-batches).
    if (auto offset = func.getArgAttrOfType<IntegerAttr>(i, attr::kSampleOffset))
      buf->set_sample_offset(offset.getInt());
    // A parameter, its optimizer state or a running statistic split over
    // mesh axes (loom-record-arg-shardings) gives its global shape and each
    // dimension's axes; every rank finds its place from its coordinate. A
    // fused parameter viewed by blocks (loom-split-fused-projections) is
    // described in its initializer's shape, the blocks' dimension merged
    // back with a several-block split.
    bool persistent = role == plan::PARAMETER ||
                      role == plan::OPTIMIZER_STATE ||
                      role == plan::RUNNING_STAT;
    auto split = func.getArgAttrOfType<ArrayAttr>(i, attr::kSplitAxes);
    DenseI64ArrayAttr fused = param ? fusedBlocks.lookup(param) : nullptr;
    if (persistent && (split || fused)) {
      if (split && static_cast<int>(split.size()) != buf->shape_size())
        return func.emitError("argument #")
               << i << ": loom.split_axes has " << split.size()
               << " entries for a rank-" << buf->shape_size() << " tensor";
      SmallVector<int64_t> global;
      SmallVector<SmallVector<int32_t>> axes;
      for (int d = 0; d < buf->shape_size(); ++d) {
        int64_t n = 1;
        SmallVector<int32_t> dimAxes;
        if (split)
          for (int64_t axis :
               cast<DenseI64ArrayAttr>(split[d]).asArrayRef()) {
            if (axis < 0 || axis >= static_cast<int64_t>(meshShape.size()))
              return func.emitError("argument #")
                     << i << " is split over mesh axis " << axis
                     << ", which the mesh does not have";
            dimAxes.push_back(axis);
            n *= meshShape[axis];
          }
        global.push_back(buf->shape(d) * n);
        axes.push_back(dimAxes);
      }
      int64_t blocksDim = -1, blocks = 1;
      if (fused) {
        blocksDim = fused[0];
        blocks = fused[1];
        if (blocksDim + 1 >= static_cast<int64_t>(global.size()) ||
            global[blocksDim] != blocks || !axes[blocksDim].empty())
          return func.emitError("argument #")
                 << i << ": the blocks of a fused parameter (dimension "
                 << blocksDim << ") must stay whole";
        global[blocksDim] *= global[blocksDim + 1];
        global.erase(global.begin() + blocksDim + 1);
        axes.erase(axes.begin() + blocksDim);
      }
      for (auto [d, size] : llvm::enumerate(global)) {
        plan::DimSharding *dim = buf->add_dim_shardings();
        for (int32_t axis : axes[d])
          dim->add_axes(axis);
        dim->set_blocks(static_cast<int64_t>(d) == blocksDim ? blocks : 1);
        buf->add_global_shape(size);
      }
    } else {
      for (int64_t d : buf->shape()) {
        buf->add_global_shape(d);
        buf->add_shard_offset(0);
      }
    }
    if (role == plan::PARAMETER) {
      int64_t numel = 1;
      for (int64_t d : buf->global_shape())
        numel *= d;
      memory.numParameters += numel;
    }
  }
  return success();
}

plan::Instruction &Emitter::addInstruction(StringRef name,
                                           ArrayRef<Value> inputs,
                                           ArrayRef<int> outputs,
                                           Location loc) {
  SmallVector<int> ids;
  for (Value v : inputs)
    ids.push_back(bufferOf(v));
  return addInstruction(name, ids, outputs, loc);
}

plan::Instruction &Emitter::addInstruction(StringRef name,
                                           ArrayRef<int> inputs,
                                           ArrayRef<int> outputs,
                                           Location loc) {
  for (int id : inputs)
    use(id);
  for (int id : outputs)
    use(id);
  plan::Instruction *inst = program->add_instructions();
  inst->set_op(name.str());
  if (current) {
    if (auto mb = current->getAttrOfType<IntegerAttr>(
            LoomDialect::MicroBatchAttrHelper::getNameStr()))
      inst->set_micro_batch(static_cast<int32_t>(mb.getInt()) + 1);
    inst->set_backward(
        current->hasAttr(LoomDialect::BackwardAttrHelper::getNameStr()));
  }
  for (int id : inputs)
    inst->add_inputs(id);
  for (int id : outputs)
    inst->add_outputs(id);
  inst->set_loc(describeLoc(loc));
  return *inst;
}

/// Bytes of `v`'s static-shaped f32 tensor.
static int64_t f32Bytes(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements() * 4;
}

static int64_t alignArena(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

LogicalResult Emitter::emitBuckets() {
  // One f32 buffer per bucket, its tensors side by side in operand order
  // (each at an aligned offset, so kernels see aligned tensors); the
  // collective reduces the whole range, gaps included.
  for (Operation &op : func.getBody().front()) {
    auto start = dyn_cast<AllReduceStartOp>(op);
    if (!start)
      continue;
    int64_t bytes = 0;
    SmallVector<std::pair<Value, int64_t>> slots;
    for (Value v : start.getInputs()) {
      if (!v.getDefiningOp() || isa<ReshapeOp, ConstantOp>(v.getDefiningOp()) ||
          bucketSlots.count(v))
        return start.emitError("a bucket's tensors must each be made by an "
                               "op of their own and be in one bucket");
      slots.push_back({v, bytes});
      bytes += alignArena(f32Bytes(v));
    }
    if (bucketBuffers.count(start.getBucket()))
      return start.emitError("bucket ")
             << start.getBucket() << " is started twice";
    auto type = RankedTensorType::get({bytes / 4},
                                      Float32Type::get(func.getContext()));
    FailureOr<int> id = newBuffer(type, plan::TEMPORARY, start.getLoc());
    if (failed(id))
      return failure();
    program->mutable_buffers(*id)->set_name("bucket " +
                                            std::to_string(start.getBucket()));
    bucketBuffers[start.getBucket()] = *id;
    for (auto [v, offset] : slots)
      bucketSlots[v] = {*id, offset};
  }
  return success();
}

static void setF(plan::Instruction &inst, StringRef name, APFloat v) {
  (*inst.mutable_attrs())[name.str()].set_f(v.convertToDouble());
}
static void setAxes(plan::Instruction &inst, ArrayRef<int16_t> axes) {
  plan::Attr &attr = (*inst.mutable_attrs())["axes"];
  for (int16_t axis : axes)
    attr.mutable_ints()->add_values(axis);
}

static void setI(plan::Instruction &inst, StringRef name, int64_t v) {
  (*inst.mutable_attrs())[name.str()].set_i(v);
}

LogicalResult Emitter::emitOp(Operation *op) {
  Location loc = op->getLoc();
  // Updates write their parameter and state buffers in place.
  if (auto adamw = dyn_cast<AdamwOp>(op)) {
    SmallVector<int> outs{bufferOf(adamw.getParam()),
                          bufferOf(adamw.getExpAvg()),
                          bufferOf(adamw.getExpAvgSq())};
    plan::Instruction &inst =
        addInstruction("adamw", SmallVector<Value>(op->getOperands()), outs, loc);
    setF(inst, "lr", adamw.getLr());
    setF(inst, "beta1", adamw.getBeta1());
    setF(inst, "beta2", adamw.getBeta2());
    setF(inst, "eps", adamw.getEps());
    setF(inst, "weight_decay", adamw.getWeightDecay());
    for (auto [result, id] : llvm::zip(op->getResults(), outs))
      buffers[result] = id;
    return success();
  }
  if (auto sgd = dyn_cast<SgdOp>(op)) {
    SmallVector<int> outs{bufferOf(sgd.getParam())};
    if (sgd.getMomentumBuffer())
      outs.push_back(bufferOf(sgd.getMomentumBuffer()));
    plan::Instruction &inst =
        addInstruction("sgd", SmallVector<Value>(op->getOperands()), outs, loc);
    setF(inst, "lr", sgd.getLr());
    setF(inst, "momentum", sgd.getMomentum());
    setF(inst, "weight_decay", sgd.getWeightDecay());
    setF(inst, "dampening", sgd.getDampening());
    setI(inst, "nesterov", sgd.getNesterov() ? 1 : 0);
    for (auto [result, id] : llvm::zip(op->getResults(), outs))
      buffers[result] = id;
    return success();
  }
  if (auto cst = dyn_cast<ConstantOp>(op)) {
    FailureOr<int> id = newBuffer(cst.getResult(), plan::CONSTANT, loc);
    if (failed(id))
      return failure();
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    if (!dense ||
        !(dense.getElementType().isF32() || dense.getElementType().isBF16() ||
          dense.getElementType().isInteger(64)))
      return op->emitError(
          "only dense f32, bf16 and i64 constants can be emitted");
    std::string bytes;
    if (dense.getElementType().isF32()) {
      bytes.reserve(dense.getNumElements() * sizeof(float));
      for (float f : dense.getValues<float>())
        bytes.append(reinterpret_cast<const char *>(&f), sizeof(float));
    } else if (dense.getElementType().isBF16()) {
      bytes.reserve(dense.getNumElements() * sizeof(uint16_t));
      for (APFloat f : dense.getValues<APFloat>()) {
        auto bits = static_cast<uint16_t>(f.bitcastToAPInt().getZExtValue());
        bytes.append(reinterpret_cast<const char *>(&bits), sizeof(bits));
      }
    } else {
      bytes.reserve(dense.getNumElements() * sizeof(int64_t));
      for (int64_t i : dense.getValues<int64_t>())
        bytes.append(reinterpret_cast<const char *>(&i), sizeof(int64_t));
    }
    plan::Buffer *buf = program->mutable_buffers(*id);
    buf->set_data(bytes);
    buf->set_name(describeLoc(loc));
    return success();
  }

  // A reshape is a view: its result shares its input's bytes and costs no
  // instruction; the input then lives as long as the view is used.
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    FailureOr<int> id = newBuffer(reshape.getResult(), plan::TEMPORARY, loc);
    if (failed(id))
      return failure();
    program->mutable_buffers(*id)->set_name(describeLoc(loc));
    int input = bufferOf(reshape.getInput());
    aliasOf[*id] = root(input);
    aliasOffset[*id] = aliasOffset[input];
    ranges[*id].size = 0;
    use(*id);
    return success();
  }

  // A micro-batch that is contiguous in its input (no dimension of size > 1
  // before its axis) and starts on the arena's 64-byte alignment is a view
  // too, at its block's byte offset; any other is a `slice` (f32).
  if (auto mb = dyn_cast<MicroBatchOp>(op)) {
    auto type = cast<RankedTensorType>(mb.getInput().getType());
    int64_t outer = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(mb.getAxis()); ++d)
      outer *= type.getDimSize(d);
    FailureOr<int> id = newBuffer(mb.getResult(), plan::TEMPORARY, loc);
    if (failed(id))
      return failure();
    program->mutable_buffers(*id)->set_name(describeLoc(loc));
    int input = bufferOf(mb.getInput());
    int64_t offset =
        aliasOffset[input] + mb.getIndex() * program->buffers(*id).size_bytes();
    if (outer == 1 && offset % 64 == 0) {
      aliasOf[*id] = root(input);
      aliasOffset[*id] = offset;
      ranges[*id].size = 0;
      use(*id);
      return success();
    }
    if (!type.getElementType().isF32())
      return op->emitError("cannot emit micro-batch ")
             << mb.getIndex() << " of " << type
             << ": it is not a 64-byte aligned block of its input, and only "
                "f32 is sliced; use a micro-batch size whose block is a "
                "multiple of 64 bytes";
    int64_t size = type.getDimSize(mb.getAxis()) / mb.getCount();
    int64_t start = mb.getIndex() * size;
    plan::Instruction &inst =
        addInstruction("slice", ArrayRef<int>{input}, ArrayRef<int>{*id}, loc);
    auto setList = [&](StringRef key, int64_t v) {
      (*inst.mutable_attrs())[key.str()].mutable_ints()->add_values(v);
    };
    setList("axes", mb.getAxis());
    setList("starts", start);
    setList("ends", start + size);
    setList("steps", 1);
    return success();
  }

  // A bucket is reduced in place: its tensors in flight and their sums are
  // the bytes they were made in, and the instructions name the bucket's
  // buffer.
  if (isa<AllReduceStartOp, AllReduceWaitOp>(op)) {
    auto start = dyn_cast<AllReduceStartOp>(op);
    if (!start)
      start = cast<AllReduceWaitOp>(op).getStart();
    auto bucket = bucketBuffers.find(start.getBucket());
    if (bucket == bucketBuffers.end())
      return op->emitError("bucket has no start before it");
    for (auto [in, out] : llvm::zip(op->getOperands(), op->getResults()))
      buffers[out] = bufferOf(in);
    int id = bucket->second;
    plan::Instruction &inst = addInstruction(
        start == op ? "all_reduce_start" : "all_reduce_wait",
        ArrayRef<int>{id}, ArrayRef<int>{id}, loc);
    setI(inst, "bucket", start.getBucket());
    if (start == op) {
      setAxes(inst, start.getGridAxes());
      (*inst.mutable_attrs())["reduction"].set_s("sum");
    }
    return success();
  }

  if (isa<ReduceScatterStartOp, AllGatherStartOp>(op))
    return emitBlockStart(op);
  if (isa<ReduceScatterWaitOp, AllGatherWaitOp>(op))
    return emitBlockWait(op);

  // Pipeline transfers (loom-split-stages): a receive's operand only gives
  // its type; the bytes a send hands over stay unchanged until the step
  // ends, when the runtime waits for the send.
  if (isa<tensor::EmptyOp>(op)) {
    if (!llvm::all_of(op->getUsers(),
                      [](Operation *u) { return isa<shard::RecvOp>(u); }))
      return op->emitError("a tensor.empty can only be emitted as the "
                           "operand of a shard.recv");
    return success();
  }
  if (isa<shard::SendOp, shard::RecvOp>(op))
    return emitTransfer(op);

  StringRef name;
  if (isa<shard::AllReduceOp>(op))
    name = "all_reduce";
  else if (isa<shard::AllSliceOp>(op))
    name = "all_slice";
  else if (isa<shard::AllGatherOp>(op))
    name = "all_gather";
  else if (isa<shard::ReduceScatterOp>(op))
    name = "reduce_scatter";
  else if (isa<shard::AllToAllOp>(op))
    name = "all_to_all";
  else if (isa<LoomDialect>(op->getDialect()))
    name = op->getName().stripDialect();
  else
    return op->emitError("cannot emit '")
           << op->getName() << "' into a plan: no runtime instruction for it";

  SmallVector<int> outs;
  for (Value result : op->getResults()) {
    FailureOr<int> id = newBuffer(result, plan::TEMPORARY, loc);
    if (failed(id))
      return failure();
    program->mutable_buffers(*id)->set_name(describeLoc(loc));
    outs.push_back(*id);
  }
  // A `like` operand only gives the result's shape, which the output buffer
  // carries: it is not an input of the instruction.
  SmallVector<Value> ins(op->getOperands());
  if (std::optional<unsigned> like = shapeOnlyOperand(op))
    ins.erase(ins.begin() + *like);
  plan::Instruction &inst = addInstruction(name, ins, outs, loc);
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    setI(inst, "transpose_a", mm.getTransposeLhs() ? 1 : 0);
    setI(inst, "transpose_b", mm.getTransposeRhs() ? 1 : 0);
  } else if (auto ar = dyn_cast<shard::AllReduceOp>(op)) {
    if (ar.getReduction() != shard::ReductionKind::Sum)
      return op->emitError("only sum all-reduces can be emitted");
    setAxes(inst, ar.getGridAxes());
    (*inst.mutable_attrs())["reduction"].set_s("sum");
  } else if (auto slice = dyn_cast<shard::AllSliceOp>(op)) {
    setAxes(inst, slice.getGridAxes());
    setI(inst, "axis", slice.getSliceAxis().getSExtValue());
  } else if (auto gather = dyn_cast<shard::AllGatherOp>(op)) {
    setAxes(inst, gather.getGridAxes());
    setI(inst, "axis", gather.getGatherAxis().getSExtValue());
  } else if (auto scatter = dyn_cast<shard::ReduceScatterOp>(op)) {
    if (scatter.getReduction() != shard::ReductionKind::Sum)
      return op->emitError("only sum reduce-scatters can be emitted");
    setAxes(inst, scatter.getGridAxes());
    setI(inst, "axis", scatter.getScatterAxis().getSExtValue());
    (*inst.mutable_attrs())["reduction"].set_s("sum");
  } else if (auto a2a = dyn_cast<shard::AllToAllOp>(op)) {
    setAxes(inst, a2a.getGridAxes());
    setI(inst, "split_axis", a2a.getSplitAxis().getSExtValue());
    setI(inst, "concat_axis", a2a.getConcatAxis().getSExtValue());
  } else {
    // Every other op's attributes carry over by name (docs/plan-format.md).
    // A conversion's target type is its output buffer's dtype; the running
    // statistics a batch norm names (left in a forward plan) are the
    // training step's state, not the kernel's.
    for (NamedAttribute a : op->getAttrDictionary()) {
      if (isa<ConvertOp>(op) && a.getName() == "to")
        continue;
      // The planner's marks are the instruction's own fields.
      if (a.getName().getValue().starts_with("loom."))
        continue;
      if (isa<BatchNormOp>(op) && a.getName() != "epsilon")
        continue;
      plan::Attr &out = (*inst.mutable_attrs())[a.getName().str()];
      Attribute v = a.getValue();
      if (auto i = dyn_cast<IntegerAttr>(v))
        out.set_i(i.getInt());
      else if (auto f = dyn_cast<FloatAttr>(v))
        out.set_f(f.getValueAsDouble());
      else if (isa<UnitAttr>(v))
        out.set_i(1);
      else if (auto list = dyn_cast<DenseI64ArrayAttr>(v))
        for (int64_t x : list.asArrayRef())
          out.mutable_ints()->add_values(x);
      else if (auto str = dyn_cast<StringAttr>(v))
        out.set_s(str.str());
      else
        return op->emitError("cannot emit attribute '")
               << a.getName() << "' of type " << v << " into a plan";
    }
  }
  return success();
}

/// The mesh axes, dims and bucket of a reduce-scatter or all-gather
/// bucket's start.
static void setBlockAttrs(plan::Instruction &inst, const BlockBucket &b) {
  if (b.scatter)
    (*inst.mutable_attrs())["reduction"].set_s("sum");
  setAxes(inst, b.axes);
  plan::Attr &list = (*inst.mutable_attrs())["dims"];
  for (int64_t d : b.dims)
    list.mutable_ints()->add_values(d);
  setI(inst, "bucket", b.bucket);
}

LogicalResult Emitter::emitBlockStart(Operation *op) {
  // The operands are packed into the send staging, block by block (a
  // reduce-scatter) or side by side (an all-gather); the collective fills
  // the receive staging, which the wait unpacks into the results. Both
  // stay live from the start to the wait.
  int64_t sent = 0, received = 0;
  for (Value v : op->getOperands())
    sent += cast<RankedTensorType>(v.getType()).getNumElements();
  for (Value v : op->getResults())
    received += cast<RankedTensorType>(v.getType()).getNumElements();
  Type element =
      cast<RankedTensorType>(op->getOperand(0).getType()).getElementType();
  BlockBucket block = blockBucketOf(op);
  int64_t bucket = block.bucket;
  if (blockStaging.count(bucket) || bucketBuffers.count(bucket))
    return op->emitError("bucket ") << bucket << " is started twice";
  int ids[2];
  int64_t sizes[2] = {sent, received};
  for (auto [k, elements] : llvm::enumerate(sizes)) {
    FailureOr<int> id = newBuffer(RankedTensorType::get({elements}, element),
                                  plan::TEMPORARY, op->getLoc());
    if (failed(id))
      return failure();
    program->mutable_buffers(*id)->set_name("bucket " + std::to_string(bucket) +
                                            (k ? " recv" : " send"));
    ids[k] = *id;
  }
  blockStaging[bucket] = {ids[0], ids[1]};
  for (Value r : op->getResults())
    buffers[r] = ids[1];
  plan::Instruction &inst =
      addInstruction(op->getName().stripDialect(),
                     SmallVector<Value>(op->getOperands()),
                     ArrayRef<int>{ids[0], ids[1]}, op->getLoc());
  setBlockAttrs(inst, block);
  return success();
}

LogicalResult Emitter::emitBlockWait(Operation *op) {
  BlockBucket block = blockBucketOf(op->getOperand(0).getDefiningOp());
  auto staging = blockStaging.find(block.bucket);
  if (staging == blockStaging.end())
    return op->emitError("bucket has no start before it");
  SmallVector<int> outs;
  for (Value r : op->getResults()) {
    FailureOr<int> id = newBuffer(r, plan::TEMPORARY, op->getLoc());
    if (failed(id))
      return failure();
    program->mutable_buffers(*id)->set_name(describeLoc(op->getLoc()));
    outs.push_back(*id);
  }
  plan::Instruction &inst = addInstruction(
      op->getName().stripDialect(),
      ArrayRef<int>{staging->second.first, staging->second.second}, outs,
      op->getLoc());
  setBlockAttrs(inst, block);
  return success();
}

LogicalResult Emitter::emitTransfer(Operation *op) {
  auto send = dyn_cast<shard::SendOp>(op);
  auto recv = dyn_cast<shard::RecvOp>(op);
  ArrayRef<int16_t> axes =
      send ? send.getGridAxes() : recv.getGridAxes();
  std::optional<ArrayRef<int64_t>> peer;
  if (send && send.getDestinationDynamic().empty())
    peer = send.getDestination();
  if (recv && recv.getSourceDynamic().empty() && recv.getSource())
    peer = *recv.getSource();
  auto tag = op->getAttrOfType<IntegerAttr>(
      LoomDialect::TagAttrHelper::getNameStr());
  if (axes.size() != 1 || axes[0] != 0 || !peer || peer->size() != 1 || !tag)
    return op->emitError("only a transfer along the pp axis (grid_axes = "
                         "[0]) to or from one static stage, with a loom.tag, "
                         "can be emitted");
  if (send && !send.getResult().use_empty())
    return op->emitError("the result of a shard.send cannot be read in a "
                         "plan: read its operand");
  SmallVector<int> outs;
  if (recv) {
    FailureOr<int> id = newBuffer(recv.getResult(), plan::TEMPORARY, op->getLoc());
    if (failed(id))
      return failure();
    program->mutable_buffers(*id)->set_name(describeLoc(op->getLoc()));
    outs.push_back(*id);
  }
  SmallVector<int> ins;
  if (send) {
    int id = bufferOf(send.getInput());
    // A parameter (a tied embedding) is updated before the step ends: the
    // send reads a copy of it.
    plan::Role role = program->buffers(id).role();
    if (role != plan::TEMPORARY && role != plan::INPUT &&
        role != plan::TARGET) {
      FailureOr<int> copy =
          newBuffer(send.getInput().getType(), plan::TEMPORARY, op->getLoc());
      if (failed(copy))
        return failure();
      program->mutable_buffers(*copy)->set_name(
          program->buffers(id).name() + " (sent)");
      addInstruction("copy", ArrayRef<int>{id}, ArrayRef<int>{*copy},
                     op->getLoc());
      id = *copy;
    }
    ins.push_back(id);
    sent.push_back(id);
  }
  plan::Instruction &inst =
      addInstruction(send ? "send" : "recv", ins, outs, op->getLoc());
  setI(inst, "peer_stage", (*peer)[0]);
  setI(inst, "tag", tag.getInt());
  return success();
}

LogicalResult Emitter::emitReturn(func::ReturnOp ret) {
  bool training = func.getNumResults() > 0 && func.getResultAttr(0, attr::kLoss);
  for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
    Value v = ret.getOperand(r);
    int id = bufferOf(v);
    plan::Buffer *buf = program->mutable_buffers(id);
    if (training && r == 0) {
      if (buf->role() != plan::TEMPORARY)
        return ret.emitError("the loss must be computed, not an argument");
      buf->set_role(plan::LOSS);
      buf->set_name("loss");
      ranges[root(id)].end = kForever;
      program->set_loss_buffer(id);
      continue;
    }
    auto gradOf = func.getResultAttrOfType<StringAttr>(r, attr::kGrad);
    if (training && (func.getResultAttr(r, attr::kRunningMean) ||
                     func.getResultAttr(r, attr::kRunningVar))) {
      // A running statistic's update is copied into its persistent buffer
      // at the end of the step, when nothing reads the old value any more.
      DictionaryAttr attrs = func.getResultAttrDict(r);
      BlockArgument state;
      for (BlockArgument arg : func.getArguments()) {
        unsigned i = arg.getArgNumber();
        // The same statistic (the argument may also carry its split).
        if (func.getArgAttr(i, attr::kRunningMean) ==
                attrs.get(attr::kRunningMean) &&
            func.getArgAttr(i, attr::kRunningVar) ==
                attrs.get(attr::kRunningVar))
          state = arg;
      }
      if (!state)
        return ret.emitError("result #")
               << r << " updates a running statistic that is no argument "
               << attrs;
      addInstruction("copy", {v}, {bufferOf(state)}, v.getLoc());
      continue;
    }
    if (training && !gradOf) {
      // Updated parameters and states live in their argument's buffer: the
      // optimizer updates in place, and a value computed after it (an
      // update made on each rank's block, then gathered) is copied there at
      // the end of the step.
      DictionaryAttr attrs = func.getResultAttrDict(r);
      auto sameRole = [&](unsigned i) {
        return func.getArgAttr(i, attr::kParam) == attrs.get(attr::kParam) &&
               func.getArgAttr(i, attr::kState) == attrs.get(attr::kState);
      };
      BlockArgument updated;
      for (BlockArgument arg : func.getArguments())
        if (sameRole(arg.getArgNumber())) {
          updated = arg;
          break;
        }
      if (!updated)
        return ret.emitError("result #")
               << r << " updates a parameter that is no argument " << attrs;
      if (bufferOf(updated) == id)
        continue;
      if (updated.getType() != v.getType())
        return ret.emitError("result #")
               << r << " (" << v.getType() << ") updates its argument "
               << attrs << " of another type (" << updated.getType() << ")";
      addInstruction("copy", {v}, {bufferOf(updated)}, v.getLoc());
      continue;
    }
    // Graph outputs, and gradients of a step without optimizer (bound as
    // `grad:NAME`, for gradient checks).
    std::string name;
    if (gradOf)
      name = "grad:" + gradOf.str();
    else if (auto out = func.getResultAttrOfType<StringAttr>(r, attr::kOutput))
      name = out.str();
    else
      return ret.emitError("result #") << r << " has no loom.output name";
    if (buf->role() != plan::TEMPORARY) {
      // An output that is an input, a weight or another output: copy it out.
      FailureOr<int> out = newBuffer(v.getType(), plan::OUTPUT, ret.getLoc());
      if (failed(out))
        return failure();
      addInstruction("copy", {v}, {*out}, ret.getLoc());
      id = *out;
      buf = program->mutable_buffers(id);
    }
    buf->set_role(plan::OUTPUT);
    buf->set_name(name);
    buf->set_binding(name);
    buf->set_io_type(
        ioTypeOf(func.getResultAttrOfType<StringAttr>(r, attr::kOnnxType)));
    ranges[root(id)].end = kForever;
  }
  return success();
}

LogicalResult Emitter::run(plan::Program &prog) {
  program = &prog;
  program->set_loss_buffer(-1);
  if (failed(emitArguments()) || failed(emitBuckets()))
    return failure();
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      // The step's closing copies belong to no micro-batch.
      current = nullptr;
      if (failed(emitReturn(ret)))
        return failure();
      continue;
    }
    current = &op;
    if (failed(emitOp(&op)))
      return failure();
  }
  // Optimizer updates take the gradient as operand 1; a rank's block of
  // the all-reduced gradient (ZeRO-1) still held the whole gradient.
  for (Operation &op : func.getBody().front())
    if (isa<AdamwOp, SgdOp>(op)) {
      Value grad = op.getOperand(1);
      if (auto slice = grad.getDefiningOp<shard::AllSliceOp>())
        grad = slice.getInput();
      memory.gradients += program->buffers(bufferOf(grad)).size_bytes();
    }

  for (int id : sent)
    ranges[root(id)].end = std::max(ranges[root(id)].end, step());
  // Buffers never touched by an instruction still need a place.
  for (LiveRange &r : ranges)
    if (r.start > r.end)
      r.start = r.end = 0;
  int64_t arena = 0;
  std::vector<int64_t> offsets = assignArenaOffsets(ranges, arena);
  for (size_t i = 0; i < offsets.size(); ++i)
    program->mutable_buffers(i)->set_offset(offsets[root(i)] +
                                            aliasOffset[i]);
  program->set_arena_bytes(arena);
  memory.arena = arena;
  memory.liveBytes = liveSetBytes(ranges);
  memory.activations = std::max<int64_t>(
      0, arena - memory.parameters - memory.optimizerState - memory.gradients);
  return success();
}

} // namespace

FailureOr<plan::Plan> mlir::loom::emitPlan(ModuleOp module,
                                           const EmitOptions &options,
                                           MemoryBreakdown *memoryOut) {
  SmallVector<func::FuncOp> funcs = programFunctions(module);
  if (funcs.empty())
    return module.emitError("cannot emit a plan: no single-block @main"),
           failure();
  for (func::FuncOp func : funcs)
    if (func.isExternal() || !func.getBody().hasOneBlock())
      return func.emitError("cannot emit a plan: @")
             << func.getSymName() << " is not a single-block function",
             failure();

  SmallVector<int64_t> meshShape{1, 1, 1};
  SmallVector<std::string> axisNames{"pp", "dp", "tp"};
  if (auto grid = module.lookupSymbol<shard::GridOp>("mesh")) {
    if (grid.getRank() != 3 || !grid.getShape().size())
      return grid.emitError("expected a pp x dp x tp mesh"), failure();
    meshShape.assign(grid.getShape().begin(), grid.getShape().end());
    if (llvm::any_of(meshShape, [](int64_t d) { return d <= 0; }))
      return grid.emitError("the mesh must have static positive sizes"),
             failure();
  }
  if (static_cast<int64_t>(funcs.size()) != meshShape[0])
    return module.emitError("the mesh has ")
           << meshShape[0] << " pipeline stage(s) but the module "
           << funcs.size() << " stage function(s) (run loom-split-stages)",
           failure();

  plan::Plan plan;
  plan.set_format_version(1);
  plan.set_producer(options.producer);
  int64_t world = meshShape[0] * meshShape[1] * meshShape[2];
  plan.set_world_size(world);
  for (auto [name, size] : llvm::zip(axisNames, meshShape)) {
    plan::MeshAxis *axis = plan.add_mesh();
    axis->set_name(name);
    axis->set_size(size);
  }
  plan.set_model_path(options.modelPath);
  if (auto tied = module->getAttrOfType<DictionaryAttr>(attr::kTied))
    for (NamedAttribute entry : tied) {
      auto tie = cast<DictionaryAttr>(entry.getValue());
      plan::TiedInitializer *t = plan.add_tied_initializers();
      t->set_name(entry.getName().str());
      t->set_parameter(tie.getAs<StringAttr>("of").str());
      t->set_transposed(static_cast<bool>(tie.get("transposed")));
    }
  *plan.mutable_training() = options.training;

  // Data-parallel and tensor-parallel ranks run the same code on their own
  // samples and shards: one program for all the ranks of a pipeline stage
  // (its pp coordinate, the outermost mesh axis), each rank's slice following
  // from its coordinates. The memory figures are the largest program's, but
  // for the live-set bound: the most of any program, the bound of the peak.
  int64_t perStage = meshShape[1] * meshShape[2];
  MemoryBreakdown busiest;
  int64_t numParameters = 0, liveBytes = 0; // each stage holds its own
  for (auto [d, func] : llvm::enumerate(funcs)) {
    MemoryBreakdown memory;
    plan::Program *p = plan.add_programs();
    Emitter emitter(func, memory, options.storedWeights);
    if (failed(emitter.run(*p)))
      return failure();
    for (int64_t r = 0; r < perStage; ++r)
      p->add_ranks(static_cast<int>(d * perStage + r));
    numParameters += memory.numParameters;
    liveBytes = std::max(liveBytes, memory.liveBytes);
    if (d == 0 || memory.arena > busiest.arena)
      busiest = memory;
  }
  busiest.numParameters = numParameters;
  busiest.liveBytes = liveBytes;
  plan.set_is_training(plan.programs(0).loss_buffer() >= 0);
  if (memoryOut)
    *memoryOut = busiest;
  return plan;
}
