//===- Cluster.h - The cluster a plan is made for ---------------*- C++ -*-===//

#ifndef LOOM_PASSES_PLANNER_CLUSTER_H
#define LOOM_PASSES_PLANNER_CLUSTER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>

namespace mlir::loom {

/// One level of the interconnect: what each device can push through it.
struct Link {
  double bandwidthGBps = 0; // per device, one direction
  double latencyUs = 0;
};

/// Which link a group of devices talks over: all members inside one node, or
/// not.
enum class LinkLevel { IntraNode, InterNode };

/// What share of the peak a kernel reaches (docs/planner.md, "Kernel
/// efficiency", gives each constant's source; a calibration file replaces
/// them with a machine's own). A matrix product of m x k by k x n runs at
/// gemmMax x q(m) q(n) q(k), q(d) = d / (d + gemmHalfDim): large products
/// near the best cuBLAS reaches, a dimension of one tile at half of it.
/// Attention (FlashAttention-2) runs at its own share forward and backward.
/// A calibration of CPU ranks also measures the rate at which a product
/// reads operands that are not in cache (OpenBLAS packs them before it
/// computes) and the bytes a device's products keep in cache; a product of
/// a step that outgrows them takes its FLOPs' time plus its bytes at that
/// rate (operandColdShare). 0: its operands stream beside the compute (the
/// roofline).
struct KernelEfficiency {
  double gemmMax = 0.8;
  double gemmHalfDim = 128;
  double gemmOperandGBps = 0;
  /// 0: not measured (every step's operands out of cache).
  double gemmCacheBytes = 0;
  double attentionForward = 0.6, attentionBackward = 0.5;

  double gemm(double m, double n, double k) const {
    auto q = [&](double d) { return d / (d + gemmHalfDim); };
    return gemmMax * q(m) * q(n) * q(k);
  }
};

/// The calibration's name of a kernel's broadcasting form (`mul:broadcast`):
/// an element-wise op with an operand of another shape than its result.
inline constexpr const char *kBroadcastSuffix = ":broadcast";

/// What one kernel of the device costs, as a calibration file measured it:
/// a call overhead and the rate of its work, bytes (read and written) or,
/// for kernels measured by their FLOPs, FLOPs a second.
/// The rate holds up to the bytes the profile's larger size moved
/// (`measuredBytes`; 0: any); an op that moves more runs no faster than the
/// memory bandwidth either (Cluster::hbmGBps), as its operands no longer
/// stay in cache.
struct KernelCost {
  double callSeconds = 0;
  double bytesPerSecond = 0, flopsPerSecond = 0;
  double measuredBytes = 0;
};

/// Nodes x devices and what the devices and links can do
/// (docs/cluster-spec.md).
struct Cluster {
  std::string spec; // as the user gave it
  int64_t nodes = 1, devicesPerNode = 1;
  std::string deviceName;
  double memoryGiB = 0;
  /// Of it, what the runtime cannot plan: on a GPU the CUDA context, NCCL's
  /// buffers and cudaMalloc's rounding (docs/cluster-spec.md).
  double reserveGiB = 0;
  double peakTflopsFp32 = 0, peakTflopsBf16 = 0;
  double hbmGBps = 0;
  Link intraNode, interNode;
  /// The share of an overlapped collective (a bucket started in the
  /// backward pass) that runs beside the compute: 1 where the links move
  /// the data on their own (NCCL on GPUs), measured by a calibration file
  /// (about 0 on CPU ranks, whose cores move the data themselves).
  double commOverlap = 1;
  KernelEfficiency efficiency;
  /// Measured by a calibration file: the cost of each kernel by its op's
  /// name in the plan format, and the call overhead of the others.
  std::map<std::string, KernelCost, std::less<>> kernels;
  double kernelCallSeconds = 0;
  /// Set when a calibration file (`loomc --calibration`) replaced the
  /// figures above with measured ones.
  std::string calibration;

  /// What the predictions on this cluster rest on, as a word (the summary
  /// JSON's `predicted.basis`): `calibration`, `cluster_file` or
  /// `datasheet`.
  llvm::StringRef predictionBasisKey() const {
    if (!calibration.empty())
      return "calibration";
    return llvm::StringRef(spec).ends_with(".json") ? "cluster_file"
                                                     : "datasheet";
  }
  /// The same as the summaries say it: `calibrated by FILE`, or an
  /// uncalibrated estimate from the preset's datasheet figures (the cpu
  /// preset's stand-ins) or from the figures of a cluster file.
  std::string predictionBasis() const {
    if (!calibration.empty())
      return "calibrated by " + calibration;
    if (llvm::StringRef(spec).ends_with(".json"))
      return "uncalibrated estimate from the figures in " + spec;
    return "uncalibrated estimate from " +
           (deviceName == "cpu" ? std::string("the cpu preset's stand-in figures")
                                : "the " + deviceName + " datasheet");
  }

  int64_t numDevices() const { return nodes * devicesPerNode; }
  /// Whether the plan runs on the CPU kernels (OpCost.h's `hostKernels`).
  bool hostKernels() const { return deviceName == "cpu"; }
  double memoryBytes() const { return memoryGiB * 1024.0 * 1024.0 * 1024.0; }
  /// What a plan may hold: the memory less the reserve.
  double usableMemoryBytes() const {
    return (memoryGiB - reserveGiB) * 1024.0 * 1024.0 * 1024.0;
  }
  /// The link of `level`.
  const Link &link(LinkLevel level) const {
    return level == LinkLevel::IntraNode ? intraNode : interNode;
  }
};

/// Parses a preset (`cpu:N`, `a100-80g:NODESxGPUS`, `h100:…`, `h200:…`) or a
/// JSON cluster file, and `SPEC@FILE`: SPEC with the measured figures of a
/// calibration file (Calibration.h).
llvm::Expected<Cluster> parseCluster(llvm::StringRef spec);

} // namespace mlir::loom

#endif // LOOM_PASSES_PLANNER_CLUSTER_H
