//===- ChooseMesh.cpp - Pick the device mesh shape --------------*- C++ -*-===//

#include "ir/EntryFunction.h"
#include "ir/LoomOps.h"
#include "passes/MeshUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMCHOOSEMESHPASS
#include "passes/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {

struct ChooseMeshPass
    : public loom::impl::LoomChooseMeshPassBase<ChooseMeshPass> {
  using LoomChooseMeshPassBase::LoomChooseMeshPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = lookupEntryFunction(module);
    if (!func) {
      module.emitError("loom-choose-mesh: no function @main");
      return signalPassFailure();
    }
    if (lookupMesh(module)) {
      module.emitError("loom-choose-mesh: the module already has a mesh");
      return signalPassFailure();
    }
    int64_t nDevices = devices, nTp = tp, nPp = pp, nDp = dp, nMicro = micro;
    if (nMicro < 1) {
      module.emitError("micro must be positive, got ") << nMicro;
      return signalPassFailure();
    }
    if (microBatch < 0) {
      module.emitError("micro-batch must be positive, got ") << microBatch;
      return signalPassFailure();
    }
    if (nDevices < 1) {
      module.emitError("number of devices must be positive, got ") << nDevices;
      return signalPassFailure();
    }
    if (nTp < 1) {
      module.emitError("tp must be positive, got ") << nTp;
      return signalPassFailure();
    }
    if (nPp < 1) {
      module.emitError("pp must be positive, got ") << nPp;
      return signalPassFailure();
    }
    if (nDp == 0) {
      if (nDevices % (nTp * nPp) != 0) {
        module.emitError("tp = ")
            << nTp << " x pp = " << nPp << " does not divide the "
            << nDevices << " device(s) of the cluster; use a tp that divides "
            << nDevices;
        return signalPassFailure();
      }
      nDp = nDevices / (nTp * nPp);
    }
    if (nDp * nTp * nPp != nDevices) {
      module.emitError("mesh dp=")
          << nDp << " x tp=" << nTp << " x pp=" << nPp << " needs "
          << nDp * nTp * nPp << " devices but the cluster has " << nDevices;
      return signalPassFailure();
    }

    // Every data argument is split along dimension 0, so all must agree on
    // the batch: a model that folds the batch into another dimension of its
    // output would otherwise train on misaligned targets.
    int64_t firstBatch = -1;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      if (!func.getArgAttr(i, attr::kInput) && !func.getArgAttr(i, attr::kTarget))
        continue;
      auto type = dyn_cast<RankedTensorType>(func.getArgument(i).getType());
      if (!type || !type.hasStaticShape()) {
        func.emitError(describeDataArg(func, i))
            << " must have a static shape, got " << func.getArgument(i).getType();
        return signalPassFailure();
      }
      if (type.getRank() == 0) {
        func.emitError(describeDataArg(func, i))
            << " has no batch dimension (a scalar); the model's inputs and "
               "loss target must have the batch as dimension 0";
        return signalPassFailure();
      }
      int64_t batch = type.getDimSize(0);
      if (firstBatch < 0) {
        firstBatch = batch;
      } else if (batch != firstBatch) {
        func.emitError(describeDataArg(func, i))
            << " has " << batch << " samples in dimension 0 but the batch is "
            << firstBatch << "; the model's output must keep the batch as its "
               "first dimension";
        return signalPassFailure();
      }
      if (batch % nDp != 0) {
        func.emitError("global batch ")
            << batch << " of " << describeDataArg(func, i)
            << " is not divisible by dp = " << nDp
            << "; use a global batch that is a multiple of " << nDp;
        return signalPassFailure();
      }
    }

    // Micro-batches: as many as the micro-batch size leaves in a rank's
    // block of the batch, or as forced.
    if (firstBatch > 0 && microBatch > 0) {
      int64_t local = firstBatch / nDp;
      if (local % microBatch != 0) {
        func.emitError("a micro-batch of ")
            << microBatch.getValue() << " sample(s) does not divide the "
            << local << " samples of each dp rank (global batch "
            << firstBatch << " / dp = " << nDp
            << "); use a micro-batch that divides " << local;
        return signalPassFailure();
      }
      if (nMicro > 1 && local / microBatch != nMicro) {
        func.emitError("")
            << nMicro << " micro-batches of " << microBatch.getValue()
            << " sample(s) do not make the " << local
            << " samples of each dp rank; give only one of micro-batch and "
               "micro";
        return signalPassFailure();
      }
      nMicro = local / microBatch;
    }
    if (firstBatch > 0 && nMicro > 1 && firstBatch % (nDp * nMicro) != 0) {
      func.emitError("global batch ")
          << firstBatch << " does not split into dp = " << nDp << " x "
          << nMicro << " micro-batches; use a global batch that is a "
          << "multiple of " << nDp * nMicro;
      return signalPassFailure();
    }

    OpBuilder b(module.getBodyRegion());
    if (nMicro == 1) {
      auto grid = shard::GridOp::create(b, module.getLoc(), kMeshName,
                                        ArrayRef<int64_t>{nPp, nDp, nTp});
      grid->setAttr(kMeshAxesAttr, b.getStrArrayAttr({"pp", "dp", "tp"}));
      return;
    }
    auto grid = shard::GridOp::create(b, module.getLoc(), kMeshName,
                                      ArrayRef<int64_t>{nPp, nDp, nTp, nMicro});
    grid->setAttr(kMeshAxesAttr,
                  b.getStrArrayAttr({"pp", "dp", "tp", "micro"}));
  }
};

} // namespace
