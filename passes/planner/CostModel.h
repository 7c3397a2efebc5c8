//===- CostModel.h - Roofline ops and alpha-beta collectives ----*- C++ -*-===//
//
// The planner's cost model, plain data in and out: a request lists what one
// device executes in a step (ops with their FLOPs and bytes, collectives with
// their kind, bytes and mesh axes) and the estimate says how long it takes on
// a cluster. Ops follow the roofline, collectives the alpha-beta model per
// mesh axis (the link of the axis's groups, MeshTopology). docs/planner.md
// gives the formulas.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_PLANNER_COSTMODEL_H
#define LOOM_PASSES_PLANNER_COSTMODEL_H

#include "passes/planner/Cluster.h"
#include "passes/planner/MeshTopology.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <map>
#include <string>
#include <vector>

namespace mlir::loom::planner {

/// The arithmetic an op runs in, which picks the device's peak.
enum class Precision { Fp32, Bf16 };

/// The device's peak FLOP/s in `precision`.
double peakFlops(const Cluster &cluster, Precision precision);

/// One op a device executes: its FLOPs (multiply-adds count two), the bytes
/// it reads and writes in device memory, and its arithmetic.
struct OpRecord {
  double flops = 0;
  double bytes = 0;
  Precision precision = Precision::Fp32;
  /// The shape of each matrix product it runs (m x k by k x n; 0 when it
  /// runs none), for the efficiency of that shape.
  double gemmM = 0, gemmN = 0, gemmK = 0;
  /// The op's name in the plan format (`matmul`, `gelu`, ...), for the
  /// estimate's seconds by kind; empty when unknown.
  llvm::StringRef kind;
  /// An element-wise op whose operands do not all have its result's shape
  /// (the CPU kernels broadcast them on a slower path).
  bool broadcast = false;
};

/// The collectives the cost model knows (docs/planner.md).
enum class CollectiveKind { AllReduce, AllGather, ReduceScatter, AllToAll, Send,
                            Recv };

/// The summary JSON's name of `kind` (`all_reduce`, ...).
llvm::StringRef collectiveName(CollectiveKind kind);

/// One collective a device takes part in: `bytes` is the S of its formula
/// (the full, gathered tensor for all-gather and reduce-scatter; one rank's
/// buffer for all-reduce, all-to-all, send and recv), over the groups of
/// mesh axes `axes` (indices into the topology's axes).
struct CollectiveRecord {
  CollectiveKind kind = CollectiveKind::AllReduce;
  double bytes = 0;
  llvm::SmallVector<unsigned, 2> axes;
  /// Where it runs among the request's ops: it starts once `start` ops have
  /// run and must be done before op `wait` (>= start) runs. A blocking
  /// collective has start == wait; a bucket overlapped with the backward
  /// pass waits later. -1: after every op.
  int64_t start = -1, wait = -1;
  /// A bucket (`loom.all_reduce_start`) of `tensors` tensors reduced as one.
  bool bucket = false;
  int64_t tensors = 1;
};

/// Seconds of an op alone on a device: max(flops / peak, bytes / HBM
/// bandwidth); a missing peak or bandwidth drops its term. On a calibrated
/// cluster the FLOPs of an op with a product shape run at that shape's
/// efficiency (Cluster::efficiency) after reading `coldShare` of its bytes
/// at the measured operand rate where there is one, an op whose kernel the
/// calibration measured (Cluster::kernels) takes its call overhead and its
/// work at its rate instead (no faster than the memory bandwidth when it
/// moves more than the profile's larger size did), and every other op adds
/// the measured call overhead.
double rooflineSeconds(const OpRecord &op, const Cluster &cluster,
                       double coldShare = 1);

/// The share of a product's operand reads that miss the cache in a step
/// touching `workingSetBytes` on a device (0: unknown): none up to the
/// calibration's `gemmCacheBytes` C, all from 2C, the share of the excess
/// in between (the measured reads reach half their cost near C and all of
/// it near 2C). 1 where the cache was not measured.
double operandColdShare(const Cluster &cluster, double workingSetBytes);

/// Seconds of an m x k by k x n matrix product in `precision`: its FLOPs
/// (2mnk) at the peak times the cluster's kernel efficiency for that shape
/// (Cluster.h), plus those bytes at the measured operand rate where a
/// calibration gives one, or its bytes (each operand read and the result
/// written once, 2 or 4 bytes an element) at the HBM bandwidth, whichever
/// is longer.
double gemmSeconds(double m, double n, double k, Precision precision,
                   const Cluster &cluster);

/// Whether `op`'s FLOP time is at least its memory time (and it has FLOPs).
bool isComputeBound(const OpRecord &op, const Cluster &cluster,
                    double coldShare = 1);

/// Seconds of one collective of `kind` moving `bytes` (the S of its formula)
/// in groups of `groupSize` devices over `link`: ring all-reduce
/// 2(n-1)/n S/B + 2(n-1) alpha; all-gather, reduce-scatter and all-to-all
/// (n-1)/n S/B + (n-1) alpha; send and recv S/B + alpha; 0 when n = 1.
double collectiveSeconds(CollectiveKind kind, double bytes, int64_t groupSize,
                         const Link &link);

/// The largest bucket of gradients worth reducing in one collective.
inline constexpr int64_t kMaxBucketBytes = 25 << 20;
/// Bytes of a bucket whose ring all-reduce over `groupSize` devices on
/// `link` spends at most a tenth of its time on latency (2(n-1) alpha <=
/// 0.1 * 2(n-1)/n S/B, so S = 10 n alpha B), within [64 KiB, 25 MiB]
/// (PyTorch DDP's default bucket is 25 MiB).
int64_t bucketBytes(int64_t groupSize, const Link &link);

/// The bucket size for a group of `total` bytes: `given` when positive;
/// otherwise `link`, at most a quarter of the group (so that most buckets
/// overlap) and at least 64 KiB (loom-bucket-all-reduces and
/// loom-bucket-block-collectives, and the joint search's gradient
/// collectives).
int64_t bucketTarget(int64_t given, int64_t link, int64_t total);

/// What one device executes in a step, on a mesh.
struct StepRequest {
  std::vector<OpRecord> ops;
  std::vector<CollectiveRecord> collectives;
  /// The arithmetic the model FLOPs count against for MFU.
  Precision precision = Precision::Fp32;
  /// The bytes one device's step touches (its live set; 0: unknown), for
  /// operandColdShare.
  double workingSetBytes = 0;
};

/// Communication seconds of the collectives over one set of mesh axes.
struct AxisTime {
  std::string axes; // axis names joined by '+', e.g. `dp` or `dp+tp`
  double seconds = 0;
};

/// One step's prediction: the ops run one after another, and so do the
/// collectives over each set of mesh axes; a collective starts at its
/// `start` (or when the one before it on its axes ends) and the op at its
/// `wait` waits for it. What the ops wait is the exposed communication.
struct StepEstimate {
  double flops = 0;
  /// Roofline time of the ops whose FLOPs or whose bytes bound them.
  double computeBoundSeconds = 0, memoryBoundSeconds = 0;
  /// Per set of mesh axes, in the order first met; only axes that talk.
  llvm::SmallVector<AxisTime, 3> commSeconds;
  /// Seconds the ops wait for collectives (not hidden by overlap).
  double exposedCommSeconds = 0;
  double stepSeconds = 0;
  /// Seconds by kind: each op's under its `kind`, each collective's under
  /// its name (a bucket's as `<name>_start`), whether exposed or not.
  std::map<std::string, double> secondsByKind;
  /// Achieved model FLOP/s (in TFLOP/s) and its share of the peak of the
  /// request's precision.
  double modelTflops = 0, mfu = 0;

  /// All communication seconds.
  double totalCommSeconds() const;
};

/// Estimates one step of `request` on `cluster` with the mesh `topology`.
StepEstimate estimateStep(const StepRequest &request, const Cluster &cluster,
                          const MeshTopology &topology);

} // namespace mlir::loom::planner

#endif // LOOM_PASSES_PLANNER_COSTMODEL_H
