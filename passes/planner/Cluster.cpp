//===- Cluster.cpp - Cluster presets and JSON cluster files -----*- C++ -*-===//

#include "passes/planner/Cluster.h"
#include "passes/planner/Calibration.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace mlir::loom;
using llvm::StringRef;

static llvm::Error specError(StringRef spec, const llvm::Twine &why) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "bad cluster spec '" + spec + "': " + why +
          "; use cpu:N, a100-80g:NODESxGPUS, h100:NODESxGPUS, "
          "h200:NODESxGPUS or a JSON file (see docs/cluster-spec.md)");
}

/// What a GPU keeps that no plan places: the CUDA context (about 0.5 GiB
/// with cuBLAS loaded), NCCL's channel buffers (4 MiB a channel and peer,
/// 0.25 GiB at 8 GPUs) and cudaMalloc's 2 MiB rounding of each allocation.
constexpr double kGpuReserveGiB = 1.0;

/// A preset device and its links; see docs/cluster-spec.md for the sources.
static bool presetDevice(StringRef name, Cluster &c) {
  if (name == "cpu") {
    c.deviceName = "cpu";
    c.memoryGiB = 8;
    c.peakTflopsFp32 = c.peakTflopsBf16 = 0.05;
    // OpenBLAS's products reach their rate at small sizes: the curve
    // `loom-run --profile` measures on these machines (max 1, half_dim 4;
    // docs/cluster-spec.md, "Calibration"), not cuBLAS's tiles.
    c.efficiency.gemmMax = 1;
    c.efficiency.gemmHalfDim = 4;
    c.hbmGBps = 10;
    c.intraNode = {5, 5};
    c.interNode = {1, 20};
  } else if (name == "a100-80g") {
    c.deviceName = "A100-SXM4-80GB";
    c.memoryGiB = 80;
    c.reserveGiB = kGpuReserveGiB;
    c.peakTflopsFp32 = 19.5;
    c.peakTflopsBf16 = 312;
    c.hbmGBps = 2039;
    c.intraNode = {300, 3};
    c.interNode = {25, 10};
  } else if (name == "h100") {
    c.deviceName = "H100-SXM5-80GB";
    c.memoryGiB = 80;
    c.reserveGiB = kGpuReserveGiB;
    c.peakTflopsFp32 = 67;
    c.peakTflopsBf16 = 989;
    c.hbmGBps = 3350;
    c.intraNode = {450, 3};
    c.interNode = {50, 10};
  } else if (name == "h200") {
    c.deviceName = "H200-SXM5-141GB";
    c.memoryGiB = 139;
    c.reserveGiB = kGpuReserveGiB;
    c.peakTflopsFp32 = 67;
    c.peakTflopsBf16 = 989;
    c.hbmGBps = 4800;
    c.intraNode = {450, 3};
    c.interNode = {50, 10};
  } else {
    return false;
  }
  return true;
}

static llvm::Expected<Cluster> parseJsonCluster(StringRef spec) {
  auto file = llvm::MemoryBuffer::getFile(spec);
  if (!file)
    return specError(spec, "cannot read the file (" +
                               file.getError().message() + ")");
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*file)->getBuffer());
  if (!json)
    return specError(spec, "invalid JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root)
    return specError(spec, "the top level must be an object");
  Cluster c;
  c.spec = spec.str();
  auto need = [&](const llvm::json::Object *o, StringRef key,
                  double &out) -> llvm::Error {
    std::optional<double> v = o ? o->getNumber(key) : std::nullopt;
    if (!v || *v <= 0)
      return specError(spec, "missing or non-positive number '" + key + "'");
    out = *v;
    return llvm::Error::success();
  };
  double nodes = 0, perNode = 0;
  if (auto e = need(root, "nodes", nodes))
    return std::move(e);
  if (auto e = need(root, "devices_per_node", perNode))
    return std::move(e);
  if (nodes > 1e6 || perNode > 1e6 || nodes != std::floor(nodes) ||
      perNode != std::floor(perNode))
    return specError(spec, "'nodes' and 'devices_per_node' must be whole "
                           "numbers up to 1000000");
  c.nodes = static_cast<int64_t>(nodes);
  c.devicesPerNode = static_cast<int64_t>(perNode);
  const llvm::json::Object *device = root->getObject("device");
  if (!device)
    return specError(spec, "missing object 'device'");
  // Messages name the device ("... but the device has 10.5 KiB").
  c.deviceName = "the device";
  if (auto name = device->getString("name"))
    c.deviceName = name->str();
  if (auto e = need(device, "memory_gib", c.memoryGiB))
    return std::move(e);
  // A GPU's reserve unless given; a CPU or a device of under 4 GiB (a test's
  // stand-in) keeps none.
  c.reserveGiB = c.deviceName == "cpu" || c.memoryGiB < 4 ? 0 : kGpuReserveGiB;
  if (std::optional<double> r = device->getNumber("reserve_gib")) {
    if (!(*r >= 0) || *r >= c.memoryGiB)
      return specError(spec, "'reserve_gib' must be at least 0 and below "
                             "'memory_gib'");
    c.reserveGiB = *r;
  }
  const llvm::json::Object *peak = device->getObject("peak_tflops");
  if (auto e = need(peak, "fp32", c.peakTflopsFp32))
    return std::move(e);
  if (auto e = need(peak, "bf16", c.peakTflopsBf16))
    return std::move(e);
  if (auto v = device->getNumber("hbm_gbps"))
    c.hbmGBps = *v;
  for (auto [key, link] : {std::pair<StringRef, Link *>{"intra_node", &c.intraNode},
                           {"inter_node", &c.interNode}}) {
    const llvm::json::Object *o = root->getObject(key);
    if (!o) {
      if (key == "inter_node" && c.nodes == 1)
        continue;
      return specError(spec, "missing object '" + key + "'");
    }
    if (auto e = need(o, "bandwidth_gbps", link->bandwidthGBps))
      return std::move(e);
    link->latencyUs = o->getNumber("latency_us").value_or(0);
  }
  if (std::optional<double> overlap = root->getNumber("comm_overlap")) {
    if (!(*overlap >= 0 && *overlap <= 1))
      return specError(spec, "'comm_overlap' must lie in [0, 1]");
    c.commOverlap = *overlap;
  }
  return c;
}

llvm::Expected<Cluster> mlir::loom::parseCluster(StringRef spec) {
  // `SPEC@FILE`: the cluster with a calibration file's measured figures.
  if (auto [base, calibration] = spec.split('@'); !calibration.empty()) {
    llvm::Expected<Cluster> c = parseCluster(base);
    if (!c)
      return c.takeError();
    if (llvm::Error e = applyCalibration(calibration, *c))
      return std::move(e);
    c->spec = spec.str();
    return c;
  }
  if (spec.ends_with(".json"))
    return parseJsonCluster(spec);
  auto [name, shape] = spec.split(':');
  Cluster c;
  c.spec = spec.str();
  if (!presetDevice(name, c))
    return specError(spec, "unknown preset '" + name + "'");
  if (shape.empty())
    return specError(spec, "missing the device count after ':'");
  int64_t nodes = 1, perNode = 0;
  if (name == "cpu") {
    if (shape.getAsInteger(10, perNode) || perNode <= 0 || perNode > 1000000)
      return specError(spec, "'" + shape + "' is not a positive rank count");
  } else {
    auto [n, g] = shape.split('x');
    if (n.getAsInteger(10, nodes) || g.getAsInteger(10, perNode) ||
        nodes <= 0 || perNode <= 0 || nodes > 1000000 || perNode > 1000000)
      return specError(spec, "expected NODESxGPUS after ':', got '" + shape +
                                 "'");
  }
  c.nodes = nodes;
  c.devicesPerNode = perNode;
  return c;
}
