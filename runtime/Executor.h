//===- Executor.h - Run one rank's program --------------------------*- C++ -*-===//
//
// The executor owns a rank's arena and the prepared kernel calls of its
// program. `runStep` walks a vector of prepared calls; nothing is allocated
// or looked up per step.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXECUTOR_H
#define LOOM_RUNTIME_EXECUTOR_H

#include "runtime/Arena.h"
#include "runtime/Device.h"
#include "runtime/Numerics.h"
#include "runtime/Plan.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/InFlightBuckets.h"
#include "runtime/init/RandomInit.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/cpu/Bf16.h"
#include "runtime/support/HostTensor.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom::runtime {

class Executor {
public:
  ~Executor();

  /// Prepares the program `world.rank()` runs in `plan` (which must be
  /// validated and must outlive the executor): creates the communicators of
  /// every mesh-axis set the plan's collectives (`all_reduce`, `all_slice`,
  /// `all_gather`, `reduce_scatter`, `all_to_all`) name (collective: every
  /// rank of `world` must call `create`), allocates the arena, initialises
  /// PARAMETER / OPTIMIZER_STATE / CONSTANT buffers (ONNX initializers are
  /// read from `plan.model_path()`; with `init.random`, PARAMETERs are
  /// filled by their init rules instead, on the host arena before any
  /// upload; a sharded buffer takes this rank's elements of the global
  /// value, runtime/ShardLayout.h), and binds every instruction's kernel.
  /// A PARAMETER without a stored value needs `init.random`. `planPath`
  /// prefixes errors.
  ///
  /// With a `device` (which must outlive the executor) the arena is
  /// allocated there too and the device's kernels run; the host arena then
  /// stages values (runtime/Device.h). `world`'s sub-communicators must
  /// then reduce device memory (an NCCL world, or a one-rank world).
  static StatusOr<std::unique_ptr<Executor>>
  create(const plan::Plan &plan, Communicator &world,
         const std::string &planPath = "plan", Device *device = nullptr,
         const ParameterInit &init = {});

  /// Runs every instruction once. `step` is 0-based; AdamW uses t = step+1
  /// and SGD initialises its momentum buffer at step 0.
  Status runStep(int64_t step);

  const plan::Plan &plan() const { return thePlan; }
  const plan::Program &program() const { return *theProgram; }
  int rank() const { return myRank; }
  int64_t arenaBytes() const { return theProgram->arena_bytes(); }

  /// The buffer with `id`, or null.
  const plan::Buffer *findBuffer(int32_t id) const;
  /// The first buffer named `name`, or null.
  const plan::Buffer *findBufferByName(const std::string &name) const;
  /// The buffers of `role` bound to `binding` (several under sharding).
  std::vector<const plan::Buffer *> findBound(plan::Role role,
                                              const std::string &binding) const;

  /// The buffer's bytes in the host arena. With a device these are staging
  /// bytes: INPUT/TARGET buffers written here are uploaded at the start of
  /// every step; use `readBuffer` / `writeBuffer` for anything else.
  uint8_t *bufferData(const plan::Buffer &b) { return arena.data() + b.offset(); }
  const uint8_t *bufferData(const plan::Buffer &b) const {
    return arena.data() + b.offset();
  }
  /// The device the program runs on, or null for the host.
  Device *device() const { return theDevice; }

  /// A copy of `b`'s contents (F32 or I64), downloaded from the device when
  /// there is one.
  HostTensor readBuffer(const plan::Buffer &b) const;
  /// Overwrites `b` with `value` (same element count; converted from F64 to
  /// F32 or from I32 to I64 as needed), uploaded to the device when there
  /// is one.
  Status writeBuffer(const plan::Buffer &b, const HostTensor &value);
  /// The value of the program's LOSS buffer.
  StatusOr<float> loss() const;
  /// Seconds the last step waited on communication: the host time of its
  /// collectives' calls, blocking ones whole and a bucket's start and wait
  /// (what its overlap did not hide). Negative with a device, whose
  /// collectives return once enqueued: the host does not see the wait.
  double exposedCommSeconds() const {
    return theDevice ? -1.0 : stepCommSeconds;
  }
  /// Pipeline plans: the most micro-batches of the last step whose first
  /// forward instruction had run and whose last backward instruction had
  /// not, at once (the activations this rank held); 0 without marks.
  int64_t microBatchesInFlight() const { return stepPeakInFlight; }
  /// Host seconds the last step spent in `recv` (waiting for another
  /// pipeline stage, and the transfer; with a device, only the host part).
  double pipelineWaitSeconds() const { return stepRecvSeconds; }

  /// `loom-run --check-numerics`: with `on`, each step scans the F32 and
  /// BF16 outputs of every instruction after it runs (downloaded from the
  /// device when there is one) and, before the first instruction of the
  /// executor's first step, the PARAMETER and OPTIMIZER_STATE buffers. The
  /// first NaN or infinity of the step is kept in `numericsFault()`; the
  /// rest of the step then runs unchecked, so every rank still reaches the
  /// same collectives. CONSTANT buffers may hold infinities (attention
  /// masks): an infinity written by an instruction that reads one, directly
  /// or through other such writes, is not a fault; NaN always is. Off (the
  /// default), nothing is scanned. Allocates the host copy the device scans
  /// use.
  void setCheckNumerics(bool on);
  /// The first NaN or infinity of the last step (with `setCheckNumerics`).
  const std::optional<NumericsFault> &numericsFault() const { return fault; }

private:
  class Binder;
  struct Call {
    KernelFn fn;
    int index; // instruction index, for errors
    bool communicates = false; // a collective, timed as communication
    bool receives = false;     // a pipeline `recv`
    /// +1 at a micro-batch's first forward instruction, -1 at its last
    /// backward one.
    int inFlightDelta = 0;
  };
  /// LOOM_PROFILE=1 (or 2): wall time of every call, summed over the steps
  /// after the first (all steps when only one ran); printed by the
  /// destructor (docs/runtime.md).
  struct Profile {
    std::vector<double> seconds, firstStep;
    int64_t steps = 0;
    bool allInstructions = false; // LOOM_PROFILE=2
  };

  Executor(const plan::Plan &plan, int rank, std::string planPath);
  Status initializeBuffers(const ParameterInit &init);
  Status runCalls(const StepContext &ctx);
  /// Runs one call (timing it when it communicates) and lets the buckets
  /// in flight advance; errors carry the instruction.
  Status runCall(const Call &call, const StepContext &ctx);
  /// `runCalls`, scanning outputs for --check-numerics.
  Status runCallsChecked(const StepContext &ctx);
  /// Before a checked step's first instruction: the persistent buffers.
  Status checkStoredValues(int64_t step);
  /// The first non-finite element (or, with `nanOnly`, NaN) of the F32 or
  /// BF16 buffer `b`.
  StatusOr<std::optional<NonFinite>> scanBuffer(const plan::Buffer &b,
                                                bool nanOnly = false);
  /// Copies `b` from the host arena to the device arena (no-op on the host).
  Status uploadBuffer(const plan::Buffer &b);
  std::string where(int index) const;

  const plan::Plan &thePlan;
  const plan::Program *theProgram = nullptr;
  int myRank;
  std::string planPath;
  Arena arena;
  /// fp32 copies of the operands of host instructions on BF16 buffers.
  cpu::Bf16Scratch bf16Scratch;
  /// The kernels' scratch for one call, shared (Binder::sharedScratch).
  std::shared_ptr<CountedVector<uint8_t>> scratch[2];
  Device *theDevice = nullptr;
  /// The device copy of the arena (null without a device).
  uint8_t *deviceArena = nullptr;
  /// INPUT/TARGET buffers, uploaded from the host arena every step.
  std::vector<const plan::Buffer *> stepInputs;
  std::map<std::vector<int64_t>, std::unique_ptr<Communicator>> axisComms;
  std::vector<Call> calls;
  /// Buckets between their `all_reduce_start` and `all_reduce_wait`.
  InFlightBuckets inFlight;
  /// Seconds the last step spent in collectives' calls, and in `recv`.
  double stepCommSeconds = 0, stepRecvSeconds = 0;
  /// The micro-batches in flight now and at most in the last step.
  int64_t inFlightNow = 0, stepPeakInFlight = 0;
  std::unique_ptr<Profile> profile;
  /// --check-numerics: whether it is on; each call's F32/BF16 inputs and
  /// outputs (positions in the program's buffers); which buffers hold
  /// infinities from a constant, for the constants (found once) and this
  /// step; the host copy of a device buffer being scanned; the step's
  /// fault; and whether a step ran (the persistent buffers are checked
  /// before the first one).
  struct FloatOperands {
    std::vector<int> inputs, outputs;
  };
  bool checkNumerics = false;
  std::vector<FloatOperands> floatOperands;
  std::optional<std::vector<char>> constantInf;
  std::vector<char> stepInf;
  std::vector<float> scanCopy;
  std::optional<NumericsFault> fault;
  bool ranAStep = false;
  void printProfile() const;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXECUTOR_H
