//===- NcclCommunicator.cpp - Communicator over NCCL -------------*- C++
//-*-===//

#include "runtime/comm/NcclCommunicator.h"

#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/CudaDevice.h"

#include <cstring>

namespace loom::runtime::cuda {

StatusOr<std::unique_ptr<Communicator>>
NcclCommunicator::create(Communicator &host,
                         std::unique_ptr<Communicator> owned,
                         cudaStream_t stream) {
  std::unique_ptr<NcclCommunicator> c(
      new NcclCommunicator(host, std::move(owned), stream));
  if (c->host.size() == 1)
    return std::unique_ptr<Communicator>(std::move(c));
  // Rank 0's outcome travels with the id, so a failure there cannot leave
  // the other ranks waiting in ncclCommInitRank.
  struct {
    int ok;
    ncclUniqueId id;
  } boot;
  std::memset(&boot, 0, sizeof(boot));
  Status made = Status::ok();
  if (c->host.rank() == 0) {
    made = ncclCheck(ncclGetUniqueId(&boot.id), "ncclGetUniqueId");
    boot.ok = made.isOk() ? 1 : 0;
  }
  LOOM_RETURN_IF_ERROR(c->host.broadcast(&boot, sizeof(boot), 0));
  LOOM_RETURN_IF_ERROR(made);
  if (!boot.ok)
    return makeError("ncclGetUniqueId failed on rank 0");
  LOOM_RETURN_IF_ERROR(ncclCheck(
      ncclCommInitRank(&c->comm, c->host.size(), boot.id, c->host.rank()),
      "ncclCommInitRank"));
  LOOM_RETURN_IF_ERROR(cudaCheck(
      cudaStreamCreateWithFlags(&c->commStream, cudaStreamNonBlocking),
      "cudaStreamCreateWithFlags (NCCL stream)"));
  for (cudaEvent_t *e : {&c->ready, &c->done})
    LOOM_RETURN_IF_ERROR(
        cudaCheck(cudaEventCreateWithFlags(e, cudaEventDisableTiming),
                  "cudaEventCreateWithFlags (NCCL stream)"));
  return std::unique_ptr<Communicator>(std::move(c));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm) {
    cudaStreamSynchronize(stream);
    if (commStream)
      cudaStreamSynchronize(commStream);
    ncclCommDestroy(comm);
  }
  for (cudaEvent_t e : {ready, done})
    if (e)
      cudaEventDestroy(e);
  if (commStream)
    cudaStreamDestroy(commStream);
}

Status NcclCommunicator::enterCommStream() {
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaEventRecord(ready, stream), "cudaEventRecord (NCCL)"));
  return cudaCheck(cudaStreamWaitEvent(commStream, ready, 0),
                   "cudaStreamWaitEvent (NCCL)");
}

Status NcclCommunicator::leaveCommStream() {
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaEventRecord(done, commStream), "cudaEventRecord (NCCL)"));
  return cudaCheck(cudaStreamWaitEvent(stream, done, 0),
                   "cudaStreamWaitEvent (NCCL)");
}

namespace {

/// A sum in flight on the communication stream: its end is an event the
/// device's stream waits for at `wait`.
class NcclPending final : public PendingCollective {
public:
  NcclPending(cudaEvent_t end, cudaStream_t compute)
      : end(end), compute(compute) {}
  ~NcclPending() override {
    if (end)
      cudaEventDestroy(end); // released once the event completes
  }
  StatusOr<bool> test() override {
    cudaError_t e = cudaEventQuery(end);
    if (e == cudaErrorNotReady)
      return false;
    LOOM_RETURN_IF_ERROR(cudaCheck(e, "cudaEventQuery (NCCL bucket)"));
    return true;
  }
  Status wait() override {
    return cudaCheck(cudaStreamWaitEvent(compute, end, 0),
                     "cudaStreamWaitEvent (NCCL bucket)");
  }

private:
  cudaEvent_t end;
  cudaStream_t compute;
};

} // namespace

Status NcclCommunicator::allReduceSum(float *deviceData, int64_t count) {
  if (!comm || count == 0)
    return Status::ok();
  LOOM_RETURN_IF_ERROR(enterCommStream());
  LOOM_RETURN_IF_ERROR(ncclCheck(ncclAllReduce(deviceData, deviceData,
                                               static_cast<size_t>(count),
                                               ncclFloat32, ncclSum, comm,
                                               commStream),
                                 "ncclAllReduce"));
  return leaveCommStream();
}

template <typename Launch>
StatusOr<std::unique_ptr<PendingCollective>>
NcclCommunicator::startOnCommStream(Launch launch, const char *what) {
  cudaEvent_t end = nullptr;
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaEventCreateWithFlags(&end, cudaEventDisableTiming),
                "cudaEventCreateWithFlags (NCCL bucket)"));
  auto pending = std::make_unique<NcclPending>(end, stream);
  LOOM_RETURN_IF_ERROR(enterCommStream());
  LOOM_RETURN_IF_ERROR(ncclCheck(launch(), what));
  LOOM_RETURN_IF_ERROR(cudaCheck(cudaEventRecord(end, commStream),
                                 "cudaEventRecord (NCCL bucket)"));
  return std::unique_ptr<PendingCollective>(std::move(pending));
}

StatusOr<std::unique_ptr<PendingCollective>>
NcclCommunicator::startAllReduceSum(float *deviceData, int64_t count) {
  if (!comm || count == 0)
    return std::unique_ptr<PendingCollective>(new FinishedCollective());
  return startOnCommStream(
      [&] {
        return ncclAllReduce(deviceData, deviceData, static_cast<size_t>(count),
                             ncclFloat32, ncclSum, comm, commStream);
      },
      "ncclAllReduce (bucket)");
}

StatusOr<std::unique_ptr<PendingCollective>>
NcclCommunicator::startAllGather(const void *deviceSend, void *deviceRecv,
                                 int64_t bytesPerRank) {
  if (!comm || bytesPerRank == 0)
    return Communicator::startAllGather(deviceSend, deviceRecv, bytesPerRank);
  return startOnCommStream(
      [&] {
        return ncclAllGather(deviceSend, deviceRecv,
                             static_cast<size_t>(bytesPerRank), ncclInt8, comm,
                             commStream);
      },
      "ncclAllGather (bucket)");
}

StatusOr<std::unique_ptr<PendingCollective>>
NcclCommunicator::startReduceScatterSum(const float *deviceSend,
                                        float *deviceRecv,
                                        int64_t countPerRank) {
  if (!comm || countPerRank == 0)
    return Communicator::startReduceScatterSum(deviceSend, deviceRecv,
                                               countPerRank);
  return startOnCommStream(
      [&] {
        return ncclReduceScatter(deviceSend, deviceRecv,
                                 static_cast<size_t>(countPerRank),
                                 ncclFloat32, ncclSum, comm, commStream);
      },
      "ncclReduceScatter (bucket)");
}

Status NcclCommunicator::allGather(const void *deviceSend, void *deviceRecv,
                                   int64_t bytesPerRank) {
  if (!comm)
    return cuda::copyOwnBlock(deviceSend, deviceRecv, bytesPerRank, stream);
  if (bytesPerRank == 0)
    return Status::ok();
  LOOM_RETURN_IF_ERROR(enterCommStream());
  LOOM_RETURN_IF_ERROR(ncclCheck(
      ncclAllGather(deviceSend, deviceRecv, static_cast<size_t>(bytesPerRank),
                    ncclInt8, comm, commStream),
      "ncclAllGather"));
  return leaveCommStream();
}

Status NcclCommunicator::reduceScatterSum(const float *deviceSend,
                                          float *deviceRecv,
                                          int64_t countPerRank) {
  if (!comm)
    return cuda::copyOwnBlock(deviceSend, deviceRecv,
                              countPerRank * int64_t(sizeof(float)), stream);
  if (countPerRank == 0)
    return Status::ok();
  LOOM_RETURN_IF_ERROR(enterCommStream());
  LOOM_RETURN_IF_ERROR(ncclCheck(
      ncclReduceScatter(deviceSend, deviceRecv,
                        static_cast<size_t>(countPerRank), ncclFloat32,
                        ncclSum, comm, commStream),
      "ncclReduceScatter"));
  return leaveCommStream();
}

Status NcclCommunicator::allToAll(const void *deviceSend, void *deviceRecv,
                                  int64_t bytesPerRank) {
  if (!comm)
    return cuda::copyOwnBlock(deviceSend, deviceRecv, bytesPerRank, stream);
  if (bytesPerRank == 0)
    return Status::ok();
  // One send and one receive per peer, fused into one group so that they
  // progress together: NCCL's all-to-all recipe, which every NCCL since 2.7
  // has (ncclAlltoAll itself is recent).
  auto *send = static_cast<const char *>(deviceSend);
  auto *recv = static_cast<char *>(deviceRecv);
  size_t bytes = static_cast<size_t>(bytesPerRank);
  LOOM_RETURN_IF_ERROR(enterCommStream());
  LOOM_RETURN_IF_ERROR(ncclCheck(ncclGroupStart(), "ncclGroupStart"));
  Status posted = Status::ok();
  for (int peer = 0; peer < size() && posted.isOk(); ++peer) {
    posted = ncclCheck(
        ncclSend(send + peer * bytes, bytes, ncclInt8, peer, comm, commStream),
        "ncclSend");
    if (posted.isOk())
      posted = ncclCheck(
          ncclRecv(recv + peer * bytes, bytes, ncclInt8, peer, comm,
                   commStream),
          "ncclRecv");
  }
  // The group is closed whatever happened inside it.
  Status ended = ncclCheck(ncclGroupEnd(), "ncclGroupEnd");
  LOOM_RETURN_IF_ERROR(posted);
  LOOM_RETURN_IF_ERROR(ended);
  return leaveCommStream();
}

Status NcclCommunicator::preparePointToPoint(
    const std::vector<std::pair<int, int>> &pairs) {
  for (auto [from, to] : pairs) {
    if (from == to || from < 0 || to < 0 || from >= size() || to >= size())
      return makeError("no transfers from rank %d to rank %d among %d", from,
                       to, size());
    // The pair splits off (sender first); every other rank alone.
    bool member = rank() == from || rank() == to;
    LOOM_ASSIGN_OR_RETURN(
        std::unique_ptr<Communicator> sub,
        host.split(member ? 0 : 1 + rank(), rank() == from ? 0 : 1));
    if (!member)
      continue;
    Communicator &subRef = *sub;
    LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> link,
                          create(subRef, std::move(sub), stream));
    (rank() == from ? sendLinks[to] : recvLinks[from]) = std::move(link);
  }
  return Status::ok();
}

StatusOr<std::unique_ptr<PendingCollective>>
NcclCommunicator::startSend(const void *deviceData, int64_t bytes, int peer,
                            int /*tag: transfers keep their order*/) {
  auto it = sendLinks.find(peer);
  if (it == sendLinks.end())
    return makeError("rank %d has no transfers to rank %d prepared", rank(),
                     peer);
  auto &link = static_cast<NcclCommunicator &>(*it->second);
  cudaEvent_t end = nullptr;
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaEventCreateWithFlags(&end, cudaEventDisableTiming),
                "cudaEventCreateWithFlags (NCCL send)"));
  auto pending = std::make_unique<NcclPending>(end, stream);
  LOOM_RETURN_IF_ERROR(link.enterCommStream());
  if (bytes > 0)
    LOOM_RETURN_IF_ERROR(ncclCheck(
        ncclSend(deviceData, static_cast<size_t>(bytes), ncclInt8, 1,
                 link.comm, link.commStream),
        "ncclSend"));
  LOOM_RETURN_IF_ERROR(cudaCheck(cudaEventRecord(end, link.commStream),
                                 "cudaEventRecord (NCCL send)"));
  return std::unique_ptr<PendingCollective>(std::move(pending));
}

Status NcclCommunicator::recv(void *deviceData, int64_t bytes, int peer,
                              int /*tag: transfers keep their order*/) {
  auto it = recvLinks.find(peer);
  if (it == recvLinks.end())
    return makeError("rank %d has no transfers from rank %d prepared",
                     rank(), peer);
  auto &link = static_cast<NcclCommunicator &>(*it->second);
  // After the kernels before it (the bytes it overwrites may still be read).
  LOOM_RETURN_IF_ERROR(link.enterCommStream());
  if (bytes > 0)
    LOOM_RETURN_IF_ERROR(ncclCheck(
        ncclRecv(deviceData, static_cast<size_t>(bytes), ncclInt8, 0,
                 link.comm, link.commStream),
        "ncclRecv"));
  return link.leaveCommStream();
}

StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::split(int color,
                                                                int key) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> sub,
                        host.split(color, key));
  Communicator &subRef = *sub;
  return create(subRef, std::move(sub), stream);
}

StatusOr<std::unique_ptr<Communicator>> createNcclWorld(Communicator &host,
                                                        Device &device) {
  auto &cudaDev = static_cast<CudaDevice &>(device);
  LOOM_RETURN_IF_ERROR(
      cudaCheck(cudaSetDevice(cudaDev.ordinal()), "cudaSetDevice"));
  return NcclCommunicator::create(host, nullptr, cudaDev.stream());
}

bool ncclAvailable() {
  int version = 0;
  return ncclGetVersion(&version) == ncclSuccess && version > 0;
}

} // namespace loom::runtime::cuda
