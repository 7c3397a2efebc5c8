//===- Session.h - The in-process training API ----------------------*- C++ -*-===//
//
// A `Session` is one rank's view of a run: it owns the plan and the executor,
// holds the data arrays and feeds each step's slice into the INPUT/TARGET
// buffers. It works with a `LocalCommunicator` (one rank, no MPI) and with
// MPI across N ranks. `loom-run` is a thin layer over it.
//
// Example (one rank):
//   LocalCommunicator world;
//   auto session = Session::create(std::move(plan), world);
//   (*session)->attachData("x", x);
//   (*session)->attachData("target", y);
//   for (int64_t i = 0; i < steps; ++i) (*session)->runStep(i);
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SESSION_H
#define LOOM_RUNTIME_SESSION_H

#include "runtime/Executor.h"
#include "runtime/data/SampleArray.h"
#include "runtime/data/SampleOrder.h"

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace loom::runtime {

class Session {
public:
  /// Validates `plan` and prepares this rank's executor (collective over
  /// `world`, see `Executor::create`). `planPath` prefixes errors. With a
  /// `device` (which must outlive the session) the program runs there.
  /// `init` says where parameters start from (`Executor::create`).
  static StatusOr<std::unique_ptr<Session>>
  create(plan::Plan plan, Communicator &world,
         const std::string &planPath = "plan", Device *device = nullptr,
         const ParameterInit &init = {});

  /// Supplies the array `binding` (an INPUT's graph input name or "target")
  /// reads from; dim 0 indexes samples. Checked with `checkBindingData`;
  /// every attached array must hold the same number of samples.
  Status attachData(const std::string &binding, HostTensor data);
  /// The same for samples read in place (a mapped .npy file, a token
  /// stream's windows).
  Status attachData(const std::string &binding, SampleArray data);

  /// Which sample each position of the run reads (sequential by default).
  void setSampleOrder(const SampleOrder &order);

  /// Supplies the validation array of `binding` (checked as `attachData`).
  /// Validation batch j is its places [j*B, (j+1)*B) in the sequential
  /// order, so every evaluation reads the same samples.
  Status attachValidationData(const std::string &binding, SampleArray data);
  /// The number of samples of the validation data (0 without any).
  int64_t validationSamples() const;
  /// Feeds validation batch `batch` instead of a training step's slice.
  Status feedValidation(int64_t batch);

  /// Keeps a copy of what a step changes (the parameters, optimizer state and
  /// running statistics of this rank), and puts it back: a validation pass
  /// runs the training program on a validation batch for its loss, then
  /// undoes the step. `dropSavedState` frees the copy.
  void saveState();
  Status restoreState();
  void dropSavedState();

  /// Writes `value` into this rank's INPUT/TARGET buffers bound to
  /// `binding` now (same element count as the buffer); data attached for
  /// the binding is detached so the next step keeps this value.
  Status setInput(const std::string &binding, const HostTensor &value);

  /// Feeds this step's slice of every attached array, then runs the program.
  Status runStep(int64_t step);
  /// The two halves of `runStep`: `feed` can fail on one rank alone (a value
  /// its samples hold), so a multi-rank driver agrees on it before `run`,
  /// whose collectives every rank must reach.
  Status feed(int64_t step);
  Status run(int64_t step);

  /// `loom-run --check-numerics`: with `on`, each step also scans the float
  /// samples it feeds and every instruction's float outputs for NaN and
  /// infinity (`Executor::setCheckNumerics`).
  void setCheckNumerics(bool on);
  /// The first NaN or infinity of the last step with the checks on: in the
  /// step's data (`step 8: the data 'x' has nan in sample 57 ...`), else
  /// the executor's.
  const std::optional<NumericsFault> &numericsFault() const;

  /// The samples of the attached data that step `step` (0-based) reads
  /// over all ranks, e.g. "samples 56..63 of the data", or in a shuffled
  /// order "samples 812, 3, 97, ... (8 of epoch 2 of the order of seed 7)";
  /// empty without attached data.
  std::string stepSamples(int64_t step) const;

  /// The loss of the last step (already averaged over ranks by the plan).
  StatusOr<float> loss() const;

  /// A copy of the buffer named `nameOrBinding`, or else of the PARAMETER,
  /// RUNNING_STAT, OUTPUT, INPUT or TARGET buffer bound to it.
  StatusOr<HostTensor> readBuffer(const std::string &nameOrBinding) const;

  /// Every OUTPUT buffer of this rank, by binding.
  std::map<std::string, HostTensor> outputs() const;

  /// The trained value of every PARAMETER buffer of this rank's program, by
  /// parameter name (binding, else onnx_initializer, else buffer name).
  /// Errors for a parameter this rank holds only a shard of: gather those
  /// with `parameters(world)`.
  StatusOr<std::map<std::string, HostTensor>> parameters() const;

  /// The global value of every PARAMETER of the plan (of every program), by
  /// parameter name, assembled on rank 0 of `world` from the shards of all
  /// ranks; other ranks get an empty map. Collective over `world` (the
  /// session's world, or a host communicator of the same ranks): every rank
  /// must call it. A replicated parameter is rank 0's copy (or, when rank
  /// 0's program has none, the lowest rank's); a sharded one is sent by one
  /// rank per distinct shard, replicas skipped (`Communicator::broadcast`).
  StatusOr<std::map<std::string, HostTensor>>
  parameters(Communicator &world) const;

  /// The value of every RUNNING_STAT buffer (batch norms' running mean and
  /// variance after the steps run so far), by initializer name.
  std::map<std::string, HostTensor> runningStats() const;

  /// Writes a copy of the plan's ONNX model with the trained parameters and
  /// the updated running statistics (one rank: the session's world must be
  /// of one rank, or hold no sharded parameter).
  Status exportOnnx(const std::string &outPath) const;

  /// `--export-onnx`: gathers the parameters and running statistics of all
  /// ranks on rank 0 of `world` (collective, as `parameters(world)`), and
  /// rank 0 writes the model; the other ranks write nothing.
  Status exportOnnx(Communicator &world, const std::string &outPath) const;

  const plan::Plan &plan() const { return *thePlan; }
  Executor &executor() { return *exec; }
  const Executor &executor() const { return *exec; }

private:
  Session() = default;
  /// The global value of every buffer of `role` in the plan, by name, on
  /// rank 0 of `world` (collective; see `parameters(world)`).
  StatusOr<std::map<std::string, HostTensor>> gather(Communicator &world,
                                                     plan::Role role) const;
  /// Writes the model with `params` (rank 0's part of `exportOnnx`).
  Status writeOnnx(std::map<std::string, HostTensor> params,
                   std::map<std::string, HostTensor> stats,
                   const std::string &outPath) const;
  std::unique_ptr<plan::Plan> thePlan;
  std::string planPath;
  std::unique_ptr<Executor> exec;
  /// Feeds `step` of `arrays` in `order`.
  Status feedFrom(const std::map<std::string, SampleArray> &arrays,
                  const SampleOrder &order, int64_t step);
  std::map<std::string, SampleArray> data, validation;
  SampleOrder order = SampleOrder::sequential();
  std::vector<std::pair<const plan::Buffer *, HostTensor>> saved;
  bool checkNumerics = false;
  std::optional<NumericsFault> dataFault;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SESSION_H
