//===- Calibration.cpp - A machine's measured curves -------------*- C++ -*-===//

#include "passes/planner/Calibration.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir::loom;
using llvm::StringRef;

static llvm::Error calibrationError(StringRef path, const llvm::Twine &why) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "bad calibration file '" + path + "': " + why +
          "; write one with [mpirun -np N] loom-run --profile FILE "
          "(docs/cluster-spec.md, \"Calibration\")");
}

/// The optional `kernels` object (op: {call_us, gbps or gflops, up_to_bytes})
/// and `kernel_call_us` of `root`.
static llvm::Error readKernels(StringRef path, const llvm::json::Object &root,
                               Cluster &c) {
  c.kernelCallSeconds = root.getNumber("kernel_call_us").value_or(0) * 1e-6;
  if (!(c.kernelCallSeconds >= 0))
    return calibrationError(path, "'kernel_call_us' must not be negative");

  const llvm::json::Object *kernels = root.getObject("kernels");
  if (!kernels)
    return llvm::Error::success();
  for (const auto &[op, value] : *kernels) {
    const llvm::json::Object *k = value.getAsObject();
    std::optional<double> call = k ? k->getNumber("call_us") : std::nullopt;
    std::optional<double> gbps = k ? k->getNumber("gbps") : std::nullopt;
    std::optional<double> gflops = k ? k->getNumber("gflops") : std::nullopt;
    double upTo = k ? k->getNumber("up_to_bytes").value_or(0) : 0;
    if (!call || !(*call >= 0) || gbps.has_value() == gflops.has_value() ||
        !(gbps.value_or(1) > 0) || !(gflops.value_or(1) > 0) || !(upTo >= 0))
      return calibrationError(
          path, "kernel '" + StringRef(op) +
                    "' needs a 'call_us' of at least 0, one positive rate "
                    "('gbps' or 'gflops') and no negative 'up_to_bytes'");
    c.kernels[std::string(StringRef(op))] = {
        *call * 1e-6, gbps.value_or(0) * 1e9, gflops.value_or(0) * 1e9, upTo};
  }
  return llvm::Error::success();
}

llvm::Error mlir::loom::applyCalibration(StringRef path, Cluster &cluster) {
  auto file = llvm::MemoryBuffer::getFile(path);
  if (!file)
    return calibrationError(path, "cannot read it (" +
                                      file.getError().message() + ")");
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*file)->getBuffer());
  if (!json)
    return calibrationError(path, "invalid JSON: " +
                                      llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root || root->getInteger("loom_calibration") != 1)
    return calibrationError(path, "not a calibration file (no "
                                  "\"loom_calibration\": 1)");
  auto number = [&](const llvm::json::Object *o, StringRef key,
                    double &out) -> llvm::Error {
    std::optional<double> v = o ? o->getNumber(key) : std::nullopt;
    if (!v || !(*v > 0))
      return calibrationError(path, "missing or non-positive '" + key + "'");
    out = *v;
    return llvm::Error::success();
  };
  double ranks = 0;
  if (auto e = number(root, "ranks", ranks))
    return e;
  if (ranks != double(cluster.devicesPerNode))
    return calibrationError(
        path, "it was measured with " + llvm::Twine(int64_t(ranks)) +
                  " rank(s) but '" + cluster.spec + "' has " +
                  llvm::Twine(cluster.devicesPerNode) +
                  " a node; measure with that many");
  Cluster c = cluster;
  const llvm::json::Object *device = root->getObject("device");
  const llvm::json::Object *peak = device ? device->getObject("peak_tflops") : nullptr;
  if (auto e = number(peak, "fp32", c.peakTflopsFp32))
    return e;
  if (auto e = number(peak, "bf16", c.peakTflopsBf16))
    return e;
  if (auto e = number(device, "hbm_gbps", c.hbmGBps))
    return e;
  const llvm::json::Object *gemm = root->getObject("gemm");
  if (auto e = number(gemm, "max_efficiency", c.efficiency.gemmMax))
    return e;
  c.efficiency.gemmHalfDim = gemm->getNumber("half_dim").value_or(-1);
  if (!(c.efficiency.gemmHalfDim >= 0))
    return calibrationError(path, "missing or negative 'half_dim'");
  if (gemm->get("operand_gbps")) {
    if (auto e = number(gemm, "operand_gbps", c.efficiency.gemmOperandGBps))
      return e;
  }
  if (gemm->get("cache_mib")) {
    if (auto e = number(gemm, "cache_mib", c.efficiency.gemmCacheBytes))
      return e;
    c.efficiency.gemmCacheBytes *= 1 << 20;
  }
  if (const llvm::json::Object *link = root->getObject("intra_node")) {
    if (auto e = number(link, "bandwidth_gbps", c.intraNode.bandwidthGBps))
      return e;
    c.intraNode.latencyUs = link->getNumber("latency_us").value_or(0);
  } else if (ranks > 1) {
    return calibrationError(path, "missing object 'intra_node'");
  }
  if (std::optional<double> overlap = root->getNumber("comm_overlap")) {
    if (!(*overlap >= 0 && *overlap <= 1))
      return calibrationError(path, "'comm_overlap' must lie in [0, 1]");
    c.commOverlap = *overlap;
  }
  if (auto e = readKernels(path, *root, c))
    return e;
  c.calibration = path.str();
  cluster = c;
  return llvm::Error::success();
}
