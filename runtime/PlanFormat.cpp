//===- PlanFormat.cpp - The plan format's rules, without kernels ----------===//

#include "runtime/PlanFormat.h"

#include "runtime/PlanIntegrity.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Checksum.h"
#include "runtime/support/HostTensor.h"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

namespace loom::runtime {

int64_t dtypeSize(plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return 4;
  case plan::I64:
    return 8;
  case plan::BF16:
    return 2;
  default:
    return 0;
  }
}

const char *dtypeName(plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return "f32";
  case plan::I64:
    return "i64";
  case plan::BF16:
    return "bf16";
  default:
    return "unspecified";
  }
}

std::vector<int64_t> bufferShape(const plan::Buffer &buffer) {
  return {buffer.shape().begin(), buffer.shape().end()};
}

std::vector<int64_t> globalShape(const plan::Buffer &buffer) {
  if (buffer.global_shape_size() == 0)
    return bufferShape(buffer);
  return {buffer.global_shape().begin(), buffer.global_shape().end()};
}

std::string exportName(const plan::Buffer &buffer) {
  if (buffer.role() != plan::PARAMETER || !buffer.binding().empty())
    return buffer.binding();
  return !buffer.onnx_initializer().empty() ? buffer.onnx_initializer()
                                            : buffer.name();
}

std::vector<int64_t> meshSizes(const plan::Plan &plan) {
  std::vector<int64_t> sizes;
  for (const plan::MeshAxis &axis : plan.mesh())
    sizes.push_back(axis.size());
  if (sizes.empty())
    sizes.push_back(plan.world_size());
  return sizes;
}

std::string meshToString(const plan::Plan &plan) {
  if (plan.mesh().empty())
    return std::to_string(plan.world_size()) + " rank(s), no mesh axes";
  std::string s;
  for (const plan::MeshAxis &axis : plan.mesh()) {
    if (!s.empty())
      s += " x ";
    s += axis.name() + "=" + std::to_string(axis.size());
  }
  return s;
}

int64_t meshCoordinate(const plan::Plan &plan, int rank,
                       const std::string &axis) {
  int64_t stride = 1;
  for (int i = plan.mesh_size() - 1; i >= 0; --i) {
    const plan::MeshAxis &a = plan.mesh(i);
    if (a.name() == axis)
      return a.size() > 0 ? (rank / stride) % a.size() : 0;
    stride *= std::max<int64_t>(a.size(), 1);
  }
  return 0;
}

int64_t meshAxisSize(const plan::Plan &plan, const std::string &axis) {
  for (const plan::MeshAxis &a : plan.mesh())
    if (a.name() == axis)
      return a.size();
  return 1;
}

int findProgramIndex(const plan::Plan &plan, int rank) {
  for (int p = 0; p < plan.programs_size(); ++p)
    for (int r : plan.programs(p).ranks())
      if (r == rank)
        return p;
  return -1;
}

namespace {

const char *roleName(plan::Role role) { return plan::Role_Name(role).c_str(); }

/// "[1, 2]" for mesh axis indices.
std::string axesToString(const plan::DimSharding &s) {
  return shapeToString({s.axes().begin(), s.axes().end()});
}

/// The rules of `dim_shardings` (docs/plan-format.md, "Sharded buffers").
Status checkDimShardings(const plan::Plan &plan, const plan::Buffer &b) {
  if (b.role() != plan::PARAMETER && b.role() != plan::OPTIMIZER_STATE &&
      b.role() != plan::RUNNING_STAT)
    return makeError("%s buffer has dim_shardings; only PARAMETER, "
                     "OPTIMIZER_STATE and RUNNING_STAT buffers may be sharded",
                     roleName(b.role()));
  std::vector<int64_t> global(b.global_shape().begin(), b.global_shape().end());
  // `shape` is the shard's shape, or a view of it with other dimensions
  // (same elements, same order): a fused weight's blocks as a dimension.
  bool view = b.global_shape_size() != b.shape_size();
  if (b.dim_shardings_size() != b.global_shape_size())
    return makeError("%d dim_shardings for the %d dimension(s) of global_shape "
                     "%s",
                     b.dim_shardings_size(), b.global_shape_size(),
                     shapeToString(global).c_str());
  if (b.shard_offset_size() != 0)
    return makeError("has both dim_shardings and shard_offset; a sharded "
                     "buffer's place comes from the rank's mesh coordinate");
  std::vector<int> usedBy(plan.mesh_size(), -1);
  int64_t shard = 1;
  for (int d = 0; d < b.dim_shardings_size(); ++d) {
    const plan::DimSharding &s = b.dim_shardings(d);
    int64_t n = 1;
    for (int32_t axis : s.axes()) {
      if (axis < 0 || axis >= plan.mesh_size())
        return makeError("dim_shardings of dimension %d name mesh axis %d, "
                         "which the mesh (%s) does not have",
                         d, axis, meshToString(plan).c_str());
      if (usedBy[axis] != -1) {
        std::string other = " twice";
        if (usedBy[axis] != d)
          other = " and dimension " + std::to_string(usedBy[axis]);
        return makeError("mesh axis %d ('%s') splits dimension %d%s", axis,
                         plan.mesh(axis).name().c_str(), d, other.c_str());
      }
      usedBy[axis] = d;
      n *= plan.mesh(axis).size();
    }
    if (s.blocks() < 0)
      return makeError("dim_shardings of dimension %d has %lld blocks", d,
                       (long long)s.blocks());
    int64_t blocks = std::max<int64_t>(s.blocks(), 1), size = global[d];
    if (size < 0)
      return makeError("negative dimension in global_shape %s",
                       shapeToString(global).c_str());
    if (size % blocks != 0 || (size / blocks) % n != 0)
      return makeError("dimension %d of global size %lld does not split into "
                       "%lld block(s) over the %lld rank(s) of mesh axes %s",
                       d, (long long)size, (long long)blocks, (long long)n,
                       axesToString(s).c_str());
    if (!view && b.shape(d) != size / n)
      return makeError("dimension %d has local size %lld; global size %lld "
                       "over the %lld rank(s) of mesh axes %s is %lld",
                       d, (long long)b.shape(d), (long long)size, (long long)n,
                       axesToString(s).c_str(), (long long)(size / n));
    shard *= size / n;
  }
  if (view && numElements(bufferShape(b)) != shard)
    return makeError("shape %s views a shard of %lld elements (global_shape "
                     "%s over its dim_shardings)",
                     shapeToString(bufferShape(b)).c_str(), (long long)shard,
                     shapeToString(global).c_str());
  return Status::ok();
}

Status checkBuffer(const plan::Plan &plan, const plan::Program &program,
                   const plan::Buffer &b) {
  if (b.dtype() != plan::F32 && b.dtype() != plan::I64 &&
      b.dtype() != plan::BF16)
    return makeError("dtype %s is not supported (f32, bf16 and i64 are)",
                     dtypeName(b.dtype()));
  // Mixed precision keeps bf16 to activations, their gradients and the
  // constants the backward pass multiplies them with: weights, optimizer
  // state, data, outputs and the loss stay f32.
  if (b.dtype() == plan::BF16 && b.role() != plan::TEMPORARY &&
      b.role() != plan::CONSTANT)
    return makeError("%s buffer is bf16; only intermediate (TEMPORARY) and "
                     "CONSTANT buffers may be bf16, parameters and optimizer "
                     "state are f32 master copies",
                     plan::Role_Name(b.role()).c_str());
  if (b.role() == plan::ROLE_UNSPECIFIED || !plan::Role_IsValid(b.role()))
    return makeError("role is unspecified");
  if (b.io_type() != plan::IO_AS_DTYPE) {
    // Floats and bools are held in f32, integers in i64.
    bool inF32 = b.io_type() == plan::IO_BOOL || b.io_type() >= plan::IO_F16;
    if (!plan::IoType_IsValid(b.io_type()) ||
        (b.role() != plan::INPUT && b.role() != plan::OUTPUT) ||
        b.dtype() != (inF32 ? plan::F32 : plan::I64))
      return makeError("io_type %d belongs on an INPUT or OUTPUT buffer of "
                       "dtype %s",
                       static_cast<int>(b.io_type()), inF32 ? "f32" : "i64");
  }
  int64_t numel = 1, bytes = dtypeSize(b.dtype());
  for (int64_t d : b.shape()) {
    if (d < 0)
      return makeError("negative dimension in shape %s",
                       shapeToString(bufferShape(b)).c_str());
    if (__builtin_mul_overflow(numel, d, &numel) ||
        __builtin_mul_overflow(bytes, d, &bytes))
      return makeError("shape %s is too large",
                       shapeToString(bufferShape(b)).c_str());
  }
  if (b.size_bytes() != bytes)
    return makeError(
        "size_bytes %lld does not match shape %s of %s (%lld "
        "bytes)",
        (long long)b.size_bytes(), shapeToString(bufferShape(b)).c_str(),
        dtypeName(b.dtype()), (long long)(numel * dtypeSize(b.dtype())));
  if (b.offset() < 0 || b.offset() % 64 != 0)
    return makeError("offset %lld is not a non-negative multiple of 64",
                     (long long)b.offset());
  if (b.offset() > program.arena_bytes() ||
      b.size_bytes() > program.arena_bytes() - b.offset())
    return makeError("bytes [%lld, %lld) lie outside the arena of %lld bytes",
                     (long long)b.offset(),
                     (long long)(b.offset() + b.size_bytes()),
                     (long long)program.arena_bytes());

  switch (b.init_case()) {
  case plan::Buffer::kData:
    if ((int64_t)b.data().size() != b.size_bytes())
      return makeError("init data has %zu bytes, expected %lld",
                       b.data().size(), (long long)b.size_bytes());
    break;
  case plan::Buffer::kOnnxInitializer:
    if (b.onnx_initializer().empty())
      return makeError("empty onnx_initializer name");
    if (plan.model_path().empty())
      return makeError("initialised from ONNX initializer '%s' but the plan "
                       "has no model_path",
                       b.onnx_initializer().c_str());
    break;
  default:
    break;
  }
  bool hasInit = b.init_case() != plan::Buffer::INIT_NOT_SET;
  switch (b.role()) {
  case plan::RUNNING_STAT:
    if (b.binding().empty())
      return makeError("RUNNING_STAT buffer has no binding (its initializer)");
    if (b.dtype() != plan::F32)
      return makeError("RUNNING_STAT buffer must be f32");
    [[fallthrough]];
  case plan::PARAMETER:
    // Without a stored value (`loomc --no-weights`) the runtime fills the
    // parameter by its rule (`loom-run --init random:SEED`).
    if (b.init_rule().kind() == plan::InitRule::NORMAL &&
        !(b.init_rule().std() >= 0 && std::isfinite(b.init_rule().std())))
      return makeError("init_rule NORMAL has a bad std %g",
                       b.init_rule().std());
    if (!plan::InitRule::Kind_IsValid(b.init_rule().kind()))
      return makeError("unknown init_rule kind %d", b.init_rule().kind());
    break;
  case plan::CONSTANT:
    if (!hasInit)
      return makeError("%s buffer has no initial value (onnx_initializer, "
                       "zeros or data)",
                       roleName(b.role()));
    break;
  case plan::OPTIMIZER_STATE:
    break;
  default:
    if (hasInit)
      return makeError("%s buffer may not have an initial value",
                       roleName(b.role()));
  }
  if (b.dim_shardings_size() != 0) {
    LOOM_RETURN_IF_ERROR(checkDimShardings(plan, b));
  } else if (b.role() == plan::PARAMETER ||
             b.role() == plan::OPTIMIZER_STATE) {
    if (b.global_shape_size() != 0 || b.shard_offset_size() != 0) {
      if (b.global_shape_size() != b.shape_size() ||
          b.shard_offset_size() != b.shape_size())
        return makeError("global_shape and shard_offset must have the rank "
                         "of shape %s",
                         shapeToString(bufferShape(b)).c_str());
      for (int i = 0; i < b.shape_size(); ++i)
        if (b.shard_offset(i) < 0 ||
            b.shard_offset(i) + b.shape(i) > b.global_shape(i))
          return makeError("shard at offset %lld of size %lld exceeds global "
                           "dimension %d of size %lld",
                           (long long)b.shard_offset(i), (long long)b.shape(i),
                           i, (long long)b.global_shape(i));
    }
  }
  if (b.role() == plan::INPUT || b.role() == plan::TARGET) {
    if (b.binding().empty())
      return makeError("%s buffer has no binding", roleName(b.role()));
    // Training feeds samples along dimension 0; a forward pass takes the
    // whole value, scalars included.
    if (plan.is_training() && b.shape_size() == 0)
      return makeError("%s buffer must have a sample dimension",
                       roleName(b.role()));
    if (b.sample_offset() < 0)
      return makeError("negative sample_offset %lld",
                       (long long)b.sample_offset());
    // Each data-parallel rank's samples must stay inside its share of the
    // batch (global_batch / dp).
    int64_t batch = plan.training().global_batch();
    int64_t dp = meshAxisSize(plan, "dp");
    if (plan.is_training() && batch > 0 && dp > 0) {
      if (batch % dp != 0)
        return makeError("the global batch of %lld does not split over dp = "
                         "%lld", (long long)batch, (long long)dp);
      int64_t share = batch / dp;
      if (b.shape(0) > share || b.sample_offset() > share - b.shape(0))
        return makeError("samples [%lld, +%lld) exceed a data-parallel "
                         "rank's share of %lld samples (global batch %lld / "
                         "dp = %lld)",
                         (long long)b.sample_offset(), (long long)b.shape(0),
                         (long long)share, (long long)batch, (long long)dp);
    }
  }
  if (b.role() == plan::OUTPUT && b.binding().empty())
    return makeError("OUTPUT buffer has no binding");
  if (b.role() == plan::LOSS && (b.dtype() != plan::F32 || numel != 1))
    return makeError("LOSS buffer must be a scalar f32");
  return Status::ok();
}

Status checkInstruction(const plan::Plan &plan,
                        const std::map<int32_t, const plan::Buffer *> &byId,
                        const plan::Instruction &inst,
                        const InstructionVerifier &verify) {
  const OpInfo *info = findOp(inst.op());
  if (!info)
    return makeError("unknown op (this runtime knows: %s)",
                     knownOpNames().c_str());
  OpView view{plan, inst, {}, {}};
  for (int32_t id : inst.inputs()) {
    auto it = byId.find(id);
    if (it == byId.end())
      return makeError("input buffer %d does not exist", id);
    view.inputs.push_back(it->second);
  }
  for (int32_t id : inst.outputs()) {
    auto it = byId.find(id);
    if (it == byId.end())
      return makeError("output buffer %d does not exist", id);
    view.outputs.push_back(it->second);
  }
  int nIn = inst.inputs_size(), nOut = inst.outputs_size();
  if (nIn < info->minInputs || nIn > info->maxInputs)
    return makeError("expects %d%s input(s), got %d", info->minInputs,
                     info->maxInputs != info->minInputs
                         ? (" to " + std::to_string(info->maxInputs)).c_str()
                         : "",
                     nIn);
  if (nOut < info->minOutputs || nOut > info->maxOutputs)
    return makeError("expects %d%s output(s), got %d", info->minOutputs,
                     info->maxOutputs != info->minOutputs
                         ? (" to " + std::to_string(info->maxOutputs)).c_str()
                         : "",
                     nOut);
  for (const plan::Buffer *out : view.outputs)
    if (out->role() == plan::INPUT || out->role() == plan::TARGET ||
        out->role() == plan::CONSTANT)
      return makeError("writes %s buffer %d '%s'", roleName(out->role()),
                       out->id(), out->name().c_str());
  return verify ? verify(view) : Status::ok();
}

Status checkProgram(const plan::Plan &plan, const plan::Program &program,
                    const InstructionVerifier &verify) {
  if (program.arena_bytes() < 0)
    return makeError("negative arena_bytes");
  std::map<int32_t, const plan::Buffer *> byId;
  for (const plan::Buffer &b : program.buffers()) {
    std::string where =
        "buffer " + std::to_string(b.id()) + " '" + b.name() + "'";
    if (b.id() < 0)
      return makeError("%s: negative id", where.c_str());
    if (!byId.emplace(b.id(), &b).second)
      return makeError("%s: duplicate buffer id", where.c_str());
    LOOM_RETURN_IF_ERROR(checkBuffer(plan, program, b).withContext(where));
  }
  bool hasLossBuffer =
      program.loss_buffer() >= 0 && byId.count(program.loss_buffer()) != 0;
  if (plan.is_training()) {
    if (!hasLossBuffer)
      return makeError("loss_buffer %d does not exist", program.loss_buffer());
    if (byId[program.loss_buffer()]->role() != plan::LOSS)
      return makeError("loss_buffer %d does not have role LOSS",
                       program.loss_buffer());
  }
  for (int i = 0; i < program.instructions_size(); ++i) {
    const plan::Instruction &inst = program.instructions(i);
    std::string where = "instruction " + std::to_string(i) + " '" + inst.op() +
                        "'" +
                        (inst.loc().empty() ? "" : " at '" + inst.loc() + "'");
    LOOM_RETURN_IF_ERROR(
        checkInstruction(plan, byId, inst, verify).withContext(where));
  }
  return checkProgramOrder(plan, program);
}

} // namespace

Status validatePlanFormat(const plan::Plan &plan, const std::string &what,
                          const InstructionVerifier &verify) {
  auto fail = [&](const Status &s) { return s.withContext(what); };
  if (plan.format_version() != kPlanFormatVersion)
    return fail(makeError("format_version %u is not supported (this runtime "
                          "reads version %u); recompile the plan with a "
                          "matching loomc",
                          plan.format_version(), kPlanFormatVersion));
  if (plan.world_size() < 1)
    return fail(
        makeError("world_size %d must be at least 1", plan.world_size()));
  if (!plan.mesh().empty()) {
    int64_t product = 1;
    for (const plan::MeshAxis &axis : plan.mesh()) {
      if (axis.size() < 1)
        return fail(makeError("mesh axis '%s' has size %lld",
                              axis.name().c_str(), (long long)axis.size()));
      if (__builtin_mul_overflow(product, axis.size(), &product))
        return fail(makeError("mesh %s has more ranks than int64 holds",
                              meshToString(plan).c_str()));
    }
    if (product != plan.world_size())
      return fail(makeError("mesh %s has %lld ranks but world_size is %d",
                            meshToString(plan).c_str(), (long long)product,
                            plan.world_size()));
  }
  LOOM_RETURN_IF_ERROR(fail(checkPlanSettings(plan)));
  if (plan.is_training() && plan.training().global_batch() < 1)
    return fail(makeError("training plan has global_batch %lld",
                          (long long)plan.training().global_batch()));
  // Every rank in exactly one program, checked on the ranks the programs
  // list (sorted), not on a table of world_size entries: the file says
  // how large world_size is.
  std::vector<std::pair<int, int>> owners; // (rank, program)
  for (int p = 0; p < plan.programs_size(); ++p) {
    for (int r : plan.programs(p).ranks()) {
      if (r < 0 || r >= plan.world_size())
        return fail(makeError("program %d lists rank %d outside [0, %d)", p, r,
                              plan.world_size()));
      owners.push_back({r, p});
    }
  }
  std::sort(owners.begin(), owners.end());
  for (size_t i = 1; i < owners.size(); ++i)
    if (owners[i].first == owners[i - 1].first)
      return fail(makeError("rank %d appears in programs %d and %d",
                            owners[i].first, owners[i - 1].second,
                            owners[i].second));
  for (int r = 0; r < plan.world_size(); ++r)
    if (size_t(r) >= owners.size() || owners[r].first != r)
      return fail(makeError("rank %d is in no program", r));
  for (int p = 0; p < plan.programs_size(); ++p)
    LOOM_RETURN_IF_ERROR(
        checkProgram(plan, plan.programs(p), verify)
            .withContext(what + ": program " + std::to_string(p)));
  return Status::ok();
}

StatusOr<plan::Plan> readPlan(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return makeError("cannot open plan '%s': %s", path.c_str(),
                     std::strerror(errno));
  // Protobuf logs why a parse failed (a string field of invalid UTF-8) on
  // stderr; the reason belongs in the one error line instead.
  static std::string parseLog;
  parseLog.clear();
  google::protobuf::LogHandler *previous = google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char *, int,
         const std::string &message) {
        if (!parseLog.empty())
          return;
        // Its advice to protobuf users is not the reader's.
        parseLog = message.substr(0, message.find(". Use the 'bytes' type"));
        while (!parseLog.empty() &&
               (parseLog.back() == ' ' || parseLog.back() == '.'))
          parseLog.pop_back();
      });
  plan::Plan plan;
  bool parsed = plan.ParseFromIstream(&in);
  google::protobuf::SetLogHandler(previous);
  if (!parsed)
    return makeError("%s: not a valid .loomplan file (protobuf parse failed%s%s)",
                     path.c_str(), parseLog.empty() ? "" : ": ",
                     parseLog.c_str());
  if (!plan.checksum().empty()) {
    LOOM_ASSIGN_OR_RETURN(std::string sum, planChecksum(plan));
    if (sum != plan.checksum())
      return makeError(
          "%s: the plan's checksum %s does not match its contents (%s): "
          "the file changed after loomc wrote it; recompile it (a plan "
          "edited on purpose runs with its checksum field cleared)",
          path.c_str(), plan.checksum().c_str(), sum.c_str());
  }
  return plan;
}

StatusOr<std::string> planChecksum(const plan::Plan &plan) {
  plan::Plan copy = plan;
  copy.clear_checksum();
  return messageChecksum(copy);
}

StatusOr<std::string> serializePlan(plan::Plan plan) {
  LOOM_ASSIGN_OR_RETURN(std::string sum, planChecksum(plan));
  plan.set_checksum(sum);
  std::string bytes;
  if (!serializeDeterministically(plan, bytes))
    return makeError("cannot serialize the plan");
  return bytes;
}

Status savePlan(const plan::Plan &plan, const std::string &path) {
  LOOM_ASSIGN_OR_RETURN(std::string bytes, serializePlan(plan));
  return writeFileAtomically(path, bytes);
}

} // namespace loom::runtime
