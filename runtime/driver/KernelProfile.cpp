//===- KernelProfile.cpp - Each kernel's cost -------------------*- C++ -*-===//

#include "runtime/driver/KernelProfile.h"
#include "runtime/PlanBuilder.h"
#include "runtime/driver/ProfileTiming.h"
#include "runtime/kernels/Kernel.h"

#include <map>

namespace loom::runtime {

using namespace profiling;

KernelCurve fitKernelCurve(const std::string &op, bool flopRated,
                           double smallWork, double smallSeconds,
                           double largeWork, double largeSeconds) {
  KernelCurve curve{op, flopRated, 0, 0, 0};
  if (largeSeconds > smallSeconds && largeWork > smallWork) {
    curve.rate = (largeWork - smallWork) / (largeSeconds - smallSeconds);
    curve.callSeconds = std::max(0.0, smallSeconds - smallWork / curve.rate);
  } else if (largeSeconds > 0) {
    curve.rate = largeWork / largeSeconds;
  }
  return curve;
}

double instructionBytes(const plan::Program &program, int index) {
  std::map<int32_t, int64_t> size;
  for (const plan::Buffer &b : program.buffers())
    size[b.id()] = b.size_bytes();
  const plan::Instruction &inst = program.instructions(index);
  double bytes = 0;
  for (int32_t id : inst.inputs())
    bytes += double(size[id]);
  for (int32_t id : inst.outputs())
    bytes += double(size[id]);
  return bytes;
}

namespace {

constexpr int64_t kWidth = 256;      // the row of the row-wise kernels
constexpr int64_t kVocabulary = 512; // the classes of the losses
constexpr int64_t kTableRows = 512;  // the rows of gather's table

using Shape = std::vector<int64_t>;

int32_t tensor(plan::Program &p, const Shape &shape,
               plan::DType dtype = plan::F32) {
  return addBuffer(p, "t" + std::to_string(p.buffers_size()), plan::TEMPORARY,
                   shape, dtype);
}

/// `op` of `inputs` tensors of `shape` into `outputs` more of it.
plan::Instruction &sameShape(plan::Program &p, const std::string &op,
                             const Shape &shape, int inputs, int outputs) {
  std::vector<int32_t> in, out;
  for (int i = 0; i < inputs; ++i)
    in.push_back(tensor(p, shape));
  for (int i = 0; i < outputs; ++i)
    out.push_back(tensor(p, shape));
  return addInst(p, op, in, out);
}

Shape rows(int64_t scale) { return {4 * scale, kWidth}; }

/// Attention's FLOPs as the planner counts them (passes/OpCost.cpp): the
/// query-key pairs, halved when causal, 2 (D + Dv) each forward and
/// 2 (3D + 2Dv) backward.
double attentionFlops(const Shape &q, bool backward) {
  double pairs = double(q[0] * q[1] * q[2]) * double(q[2]) / 2;
  double d = double(q[3]);
  return 2 * pairs * (backward ? 5 * d : 2 * d);
}

template <int Inputs, int Outputs>
double elementwise(plan::Program &p, const std::string &op, int64_t scale) {
  sameShape(p, op, rows(scale), Inputs, Outputs);
  return 0;
}

/// gelu and its gradient, in the tanh form GPT-2's exports use.
template <int Inputs>
double gelu(plan::Program &p, const std::string &op, int64_t scale) {
  setI(sameShape(p, op, rows(scale), Inputs, 1), "approximate", 1);
  return 0;
}

double scaleBy(plan::Program &p, const std::string &op, int64_t scale) {
  setF(sameShape(p, op, rows(scale), 1, 1), "factor", 0.5);
  return 0;
}

/// NCHW images by a tensor of one value a channel, as ResNet's decomposed
/// batch normalisation runs them.
double broadcast(plan::Program &p, const std::string &op, int64_t scale) {
  Shape images{scale, 64, 4, 4};
  addInst(p, op, {tensor(p, images), tensor(p, {1, 64, 1, 1})},
          {tensor(p, images)});
  return 0;
}

double normalization(plan::Program &p, const std::string &op, int64_t scale) {
  bool grad = op.size() > 5 && op.compare(op.size() - 5, 5, "_grad") == 0;
  bool layer = op.rfind("layer_norm", 0) == 0;
  int32_t x = tensor(p, rows(scale)), gamma = tensor(p, {kWidth});
  std::vector<int32_t> in{x, gamma}, out{tensor(p, rows(scale))};
  if (grad) {
    in = {tensor(p, rows(scale)), x, gamma};
    out.push_back(tensor(p, {kWidth}));
    if (layer)
      out.push_back(tensor(p, {kWidth}));
  } else if (layer) {
    in.push_back(tensor(p, {kWidth}));
  }
  plan::Instruction &inst = addInst(p, op, in, out);
  setI(inst, "axis", 1);
  setF(inst, "epsilon", 1e-5);
  return 0;
}

double crossEntropy(plan::Program &p, const std::string &op, int64_t scale) {
  int32_t logits = tensor(p, {scale, kVocabulary});
  int32_t target = tensor(p, {scale}, plan::I64);
  int32_t out =
      op == "cross_entropy" ? tensor(p, {}) : tensor(p, {scale, kVocabulary});
  setI(addInst(p, op, {logits, target}, {out}), "count", scale);
  return 0;
}

double attention(plan::Program &p, const std::string &op, int64_t scale) {
  Shape q{scale, 4, 64, 32};
  bool backward = op == "attention_grad";
  plan::Instruction &inst =
      sameShape(p, op, q, backward ? 4 : 3, backward ? 3 : 1);
  setI(inst, "causal", 1);
  setF(inst, "scale", 0.17677669529663687);
  return attentionFlops(q, backward);
}

double maxPool(plan::Program &p, const std::string &op, int64_t scale) {
  Shape image{scale, 16, 16, 16}, pooled{scale, 16, 8, 8};
  plan::Instruction &inst =
      op == "max_pool2d"
          ? addInst(p, op, {tensor(p, image)}, {tensor(p, pooled)})
          : addInst(p, op, {tensor(p, pooled), tensor(p, image)},
                    {tensor(p, image)});
  setInts(inst, "kernel", {3, 3});
  setInts(inst, "pads", {1, 1, 1, 1});
  setInts(inst, "strides", {2, 2});
  return 0;
}

double transpose(plan::Program &p, const std::string &op, int64_t scale) {
  setInts(addInst(p, op, {tensor(p, {scale, 8, 4, 32})},
                  {tensor(p, {scale, 4, 8, 32})}),
          "permutation", {0, 2, 1, 3});
  return 0;
}

double reduce(plan::Program &p, const std::string &op, int64_t scale) {
  plan::Instruction &inst =
      addInst(p, op, {tensor(p, rows(scale))}, {tensor(p, {1, kWidth})});
  setInts(inst, "axes", {0});
  setI(inst, "keep_dims", 1);
  return 0;
}

double sumTo(plan::Program &p, const std::string &op, int64_t scale) {
  addInst(p, op, {tensor(p, rows(scale))}, {tensor(p, {kWidth})});
  return 0;
}

double slice(plan::Program &p, const std::string &op, int64_t scale) {
  plan::Instruction &inst = addInst(p, op, {tensor(p, {4 * scale, 3 * kWidth})},
                                    {tensor(p, rows(scale))});
  setInts(inst, "starts", {kWidth});
  setInts(inst, "ends", {2 * kWidth});
  setInts(inst, "axes", {1});
  setInts(inst, "steps", {1});
  return 0;
}

double concat(plan::Program &p, const std::string &op, int64_t scale) {
  setI(addInst(p, op,
               {tensor(p, rows(scale)), tensor(p, rows(scale)),
                tensor(p, rows(scale))},
               {tensor(p, {4 * scale, 3 * kWidth})}),
       "axis", 1);
  return 0;
}

double gather(plan::Program &p, const std::string &op, int64_t scale) {
  int32_t index = tensor(p, {4 * scale}, plan::I64);
  Shape table{kTableRows, 128}, taken{4 * scale, 128};
  plan::Instruction &inst =
      op == "gather"
          ? addInst(p, op, {tensor(p, table), index}, {tensor(p, taken)})
          : addInst(p, op, {tensor(p, taken), index}, {tensor(p, table)});
  setI(inst, "axis", 0);
  return 0;
}

double adamw(plan::Program &p, const std::string &op, int64_t scale) {
  Shape shape{1024 * scale};
  int32_t w = tensor(p, shape), g = tensor(p, shape), m = tensor(p, shape),
          v = tensor(p, shape);
  plan::Instruction &inst = addInst(p, op, {w, g, m, v}, {w, m, v});
  setF(inst, "lr", 1e-4);
  setF(inst, "beta1", 0.9);
  setF(inst, "beta2", 0.999);
  setF(inst, "eps", 1e-8);
  setF(inst, "weight_decay", 0.01);
  return 0;
}

} // namespace

std::string kernelOp(const KernelCase &kase) {
  return kase.op.substr(0, kase.op.find(':'));
}

const std::vector<KernelCase> &kernelCases() {
  static const std::vector<KernelCase> cases = {
      {"relu", false, elementwise<1, 1>},
      {"sigmoid", false, elementwise<1, 1>},
      {"tanh", false, elementwise<1, 1>},
      {"exp", false, elementwise<1, 1>},
      {"neg", false, elementwise<1, 1>},
      {"sqrt", false, elementwise<1, 1>},
      {"rsqrt", false, elementwise<1, 1>},
      {"copy", false, elementwise<1, 1>},
      {"scale", false, scaleBy},
      {"gelu", false, gelu<1>},
      {"relu_grad", false, elementwise<2, 1>},
      {"sigmoid_grad", false, elementwise<2, 1>},
      {"tanh_grad", false, elementwise<2, 1>},
      {"gelu_grad", false, gelu<2>},
      {"add", false, elementwise<2, 1>},
      {"sub", false, elementwise<2, 1>},
      {"mul", false, elementwise<2, 1>},
      {"div", false, elementwise<2, 1>},
      {"add:broadcast", false, broadcast},
      {"sub:broadcast", false, broadcast},
      {"mul:broadcast", false, broadcast},
      {"div:broadcast", false, broadcast},
      {"layer_norm", false, normalization},
      {"layer_norm_grad", false, normalization},
      {"rms_norm", false, normalization},
      {"rms_norm_grad", false, normalization},
      {"cross_entropy", false, crossEntropy},
      {"cross_entropy_grad", false, crossEntropy},
      {"attention", true, attention},
      {"attention_grad", true, attention},
      {"max_pool2d", false, maxPool},
      {"max_pool2d_grad", false, maxPool},
      {"transpose", false, transpose},
      {"reduce_sum", false, reduce},
      {"reduce_mean", false, reduce},
      {"sum_to", false, sumTo},
      {"slice", false, slice},
      {"concat", false, concat},
      {"gather", false, gather},
      {"gather_grad", false, gather},
      {"adamw", false, adamw},
  };
  return cases;
}

/// Seconds a call of `kase` at `scale` takes on this rank, the ranks' mean,
/// with its work (bytes or FLOPs) in `work` and its bytes in `bytes`.
static StatusOr<double> secondsPerCall(Communicator &world,
                                       const KernelCase &kase, int64_t scale,
                                       double &work, double &bytes) {
  plan::Plan plan;
  plan::Program &program = *plan.add_programs();
  std::string op = kernelOp(kase);
  double flops = kase.build(program, op, scale);
  bytes = instructionBytes(program, 0);
  work = kase.flopRated ? flops : bytes;
  const plan::Instruction &inst = program.instructions(0);
  OpView view{plan, inst, {}, {}};
  for (int32_t id : inst.inputs())
    view.inputs.push_back(&program.buffers(id));
  for (int32_t id : inst.outputs())
    view.outputs.push_back(&program.buffers(id));
  const KernelDef *kernel = findKernel(op);
  if (!kernel)
    return makeError("no CPU kernel for '%s'", op.c_str());
  if (Status s = kernel->verify(view); !s.isOk())
    return s.withContext("profile case '" + kase.op + "'");
  // Every float is 0.5 (no zero to divide by, no root of a negative), every
  // index 0.
  std::vector<uint8_t> arena(size_t(program.arena_bytes()), 0);
  for (const plan::Buffer &b : program.buffers())
    if (b.dtype() == plan::F32)
      std::fill_n(reinterpret_cast<float *>(arena.data() + b.offset()),
                  b.size_bytes() / 4, 0.5f);
  HostContext context(arena, world);
  LOOM_ASSIGN_OR_RETURN(KernelFn call, kernel->bind(view, context));
  StepContext step;
  std::vector<double> runs;
  for (int r = 0; r < kRepeats; ++r) {
    LOOM_RETURN_IF_ERROR(world.barrier());
    runs.push_back(1 / callsPerSecond(0.01, [&] { (void)call(step); }));
  }
  return meanOverRanks(world, median(runs));
}

StatusOr<std::vector<KernelCurve>> measureKernels(Communicator &world) {
  std::vector<KernelCurve> curves;
  for (const KernelCase &kase : kernelCases()) {
    double smallWork = 0, largeWork = 0, smallBytes = 0, largeBytes = 0;
    LOOM_ASSIGN_OR_RETURN(
        double small,
        secondsPerCall(world, kase, kSmallScale, smallWork, smallBytes));
    LOOM_ASSIGN_OR_RETURN(
        double large,
        secondsPerCall(world, kase, kLargeScale, largeWork, largeBytes));
    KernelCurve curve = fitKernelCurve(kase.op, kase.flopRated, smallWork,
                                       small, largeWork, large);
    curve.upToBytes = largeBytes;
    curves.push_back(curve);
  }
  return curves;
}

} // namespace loom::runtime
