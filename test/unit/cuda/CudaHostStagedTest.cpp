//===- CudaHostStagedTest.cpp - Device collectives staged through the host ===//
//
// `HostStagedCommunicator` on ranks that are threads (runtime/comm/ThreadCommunicator.h), all on
// the test's one GPU, each with its own stream: every collective on device
// buffers against its definition, a split, and a staging buffer that grows.
// Skipped without a device.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "runtime/comm/ThreadCommunicator.h"
#include "runtime/comm/HostStagedCommunicator.h"
#include "runtime/cuda/CudaDevice.h"

#include <gtest/gtest.h>

#include <vector>

namespace loom::runtime::test {
namespace {

using cuda::cudaCheck;
using cuda::HostStagedCommunicator;

/// A stream and device buffers for one thread-rank, freed at the end.
class RankDevice {
public:
  Status init() {
    LOOM_RETURN_IF_ERROR(cudaCheck(
        cudaSetDevice(static_cast<cuda::CudaDevice *>(testDevice())->ordinal()),
        "cudaSetDevice"));
    return cudaCheck(cudaStreamCreate(&stream), "cudaStreamCreate");
  }
  ~RankDevice() {
    for (void *p : buffers)
      cudaFree(p);
    if (stream)
      cudaStreamDestroy(stream);
  }
  StatusOr<float *> upload(const std::vector<float> &values) {
    void *p = nullptr;
    size_t bytes = values.size() * sizeof(float);
    LOOM_RETURN_IF_ERROR(
        cudaCheck(cudaMalloc(&p, bytes ? bytes : 4), "cudaMalloc"));
    buffers.push_back(p);
    LOOM_RETURN_IF_ERROR(
        cudaCheck(cudaMemcpy(p, values.data(), bytes, cudaMemcpyHostToDevice),
                  "cudaMemcpy"));
    return static_cast<float *>(p);
  }
  /// Waits for the stream, then reads `count` floats.
  StatusOr<std::vector<float>> download(const float *p, int64_t count) {
    LOOM_RETURN_IF_ERROR(
        cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
    std::vector<float> out(static_cast<size_t>(count));
    LOOM_RETURN_IF_ERROR(
        cudaCheck(cudaMemcpy(out.data(), p, count * sizeof(float),
                             cudaMemcpyDeviceToHost),
                  "cudaMemcpy"));
    return out;
  }
  cudaStream_t stream = nullptr;

private:
  std::vector<void *> buffers;
};

float valueAt(int rank, int64_t i) { return float(1000 * rank + i); }

std::vector<float> rankValues(int rank, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    v[i] = valueAt(rank, i);
  return v;
}

Status expectEqual(const std::vector<float> &got,
                   const std::vector<float> &want, const char *what) {
  if (got != want)
    return makeError("%s: results differ from the definition", what);
  return Status::ok();
}

/// Every collective of `comm` (n ranks) on `count` floats per block.
Status checkCollectives(Communicator &comm, RankDevice &dev, int64_t count) {
  int n = comm.size(), me = comm.rank();
  // all-reduce: element i sums valueAt(r, i) over r.
  LOOM_ASSIGN_OR_RETURN(float *data, dev.upload(rankValues(me, count)));
  LOOM_RETURN_IF_ERROR(comm.allReduceSum(data, count));
  std::vector<float> sum(static_cast<size_t>(count), 0.0f);
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < count; ++i)
      sum[i] += valueAt(r, i);
  LOOM_ASSIGN_OR_RETURN(auto reduced, dev.download(data, count));
  LOOM_RETURN_IF_ERROR(expectEqual(reduced, sum, "allReduceSum"));

  // all-gather: block r is rank r's values.
  LOOM_ASSIGN_OR_RETURN(float *send, dev.upload(rankValues(me, count)));
  LOOM_ASSIGN_OR_RETURN(float *recv, dev.upload(std::vector<float>(n * count)));
  LOOM_RETURN_IF_ERROR(comm.allGather(send, recv, count * 4));
  std::vector<float> gathered;
  for (int r = 0; r < n; ++r)
    for (float v : rankValues(r, count))
      gathered.push_back(v);
  LOOM_ASSIGN_OR_RETURN(auto gotGather, dev.download(recv, n * count));
  LOOM_RETURN_IF_ERROR(expectEqual(gotGather, gathered, "allGather"));

  // reduce-scatter: block `me` of the sum of every rank's n blocks.
  LOOM_ASSIGN_OR_RETURN(float *rsSend, dev.upload(rankValues(me, n * count)));
  LOOM_ASSIGN_OR_RETURN(float *rsRecv, dev.upload(std::vector<float>(count)));
  LOOM_RETURN_IF_ERROR(comm.reduceScatterSum(rsSend, rsRecv, count));
  std::vector<float> mine(static_cast<size_t>(count), 0.0f);
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < count; ++i)
      mine[i] += valueAt(r, me * count + i);
  LOOM_ASSIGN_OR_RETURN(auto gotRs, dev.download(rsRecv, count));
  LOOM_RETURN_IF_ERROR(expectEqual(gotRs, mine, "reduceScatterSum"));

  // all-to-all: block r received is block `me` of rank r's send.
  LOOM_ASSIGN_OR_RETURN(float *aaSend, dev.upload(rankValues(me, n * count)));
  LOOM_ASSIGN_OR_RETURN(float *aaRecv,
                        dev.upload(std::vector<float>(n * count)));
  LOOM_RETURN_IF_ERROR(comm.allToAll(aaSend, aaRecv, count * 4));
  std::vector<float> swapped;
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < count; ++i)
      swapped.push_back(valueAt(r, me * count + i));
  LOOM_ASSIGN_OR_RETURN(auto gotAa, dev.download(aaRecv, n * count));
  return expectEqual(gotAa, swapped, "allToAll");
}

void expectAllOk(const std::vector<std::string> &failures) {
  for (size_t r = 0; r < failures.size(); ++r)
    EXPECT_EQ(failures[r], "") << "rank " << r;
}

TEST(CudaHostStaged, CollectivesOnSharedDevice) {
  if (!testDevice())
    GTEST_SKIP() << "no CUDA device";
  expectAllOk(runRanks(3, [](Communicator &world) -> Status {
    RankDevice dev;
    LOOM_RETURN_IF_ERROR(dev.init());
    HostStagedCommunicator comm(world, nullptr, dev.stream);
    // Small, then larger (the staging buffer grows), then small again.
    for (int64_t count : {7, 4099, 5})
      LOOM_RETURN_IF_ERROR(checkCollectives(comm, dev, count));
    if (comm.stagingBytes() < 2 * 3 * 4099 * 4)
      return makeError("staging did not grow: %lld bytes",
                       (long long)comm.stagingBytes());
    LOOM_ASSIGN_OR_RETURN(int least, comm.allReduceMin(10 + world.rank()));
    if (least != 10)
      return makeError("allReduceMin gave %d", least);
    return comm.barrier();
  }));
}

TEST(CudaHostStaged, SplitIsHostStaged) {
  if (!testDevice())
    GTEST_SKIP() << "no CUDA device";
  expectAllOk(runRanks(4, [](Communicator &world) -> Status {
    RankDevice dev;
    LOOM_RETURN_IF_ERROR(dev.init());
    HostStagedCommunicator comm(world, nullptr, dev.stream);
    // Pairs {0, 1} and {2, 3}, reversed by key.
    LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> pair,
                          comm.split(world.rank() / 2, -world.rank()));
    if (pair->size() != 2 || pair->rank() != 1 - world.rank() % 2)
      return makeError("split gave rank %d of %d", pair->rank(), pair->size());
    if (!dynamic_cast<HostStagedCommunicator *>(pair.get()))
      return makeError("split is not host-staged");
    return checkCollectives(*pair, dev, 33);
  }));
}

TEST(CudaHostStaged, OneRankCopiesOnTheDevice) {
  if (!testDevice())
    GTEST_SKIP() << "no CUDA device";
  LocalCommunicator world;
  RankDevice dev;
  ASSERT_TRUE(dev.init().isOk());
  HostStagedCommunicator comm(world, nullptr, dev.stream);
  Status s = checkCollectives(comm, dev, 10);
  EXPECT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(comm.stagingBytes(), 0);
}

TEST(CudaHostStaged, RanksOnOneGpuCountOneDevice) {
  if (!testDevice())
    GTEST_SKIP() << "no CUDA device";
  std::vector<int> counts(2, -1);
  expectAllOk(runRanks(2, [&](Communicator &world) -> Status {
    LOOM_ASSIGN_OR_RETURN(counts[world.rank()],
                          cuda::countDistinctDevices(world, *testDevice()));
    return Status::ok();
  }));
  EXPECT_EQ(counts, std::vector<int>({1, 1}));
}

} // namespace
} // namespace loom::runtime::test
