//===- MpiCommunicator.cpp - Communicator over MPI ---------------*- C++ -*-===//

#include "runtime/comm/MpiCommunicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

namespace loom::runtime {

namespace {

Status mpiError(const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    len = 0;
  return makeError("%s failed: %.*s", what, len, text);
}

/// Non-blocking collectives' requests, done when all are. A request never
/// waited for (an error ended the step) is left to MPI_Finalize: freeing an
/// active collective's request is not allowed.
class MpiPending final : public PendingCollective {
public:
  StatusOr<bool> test() override {
    if (requests.empty())
      return true;
    int done = 0;
    int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(),
                         &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS)
      return mpiError("MPI_Testall", rc);
    if (done)
      requests.clear();
    return done != 0;
  }
  Status wait() override {
    if (requests.empty())
      return Status::ok();
    int rc = MPI_Waitall(static_cast<int>(requests.size()), requests.data(),
                         MPI_STATUSES_IGNORE);
    requests.clear();
    return rc == MPI_SUCCESS ? Status::ok() : mpiError("MPI_Waitall", rc);
  }

  std::vector<MPI_Request> requests;
};

class MpiCommunicator final : public Communicator {
  /// Bytes of one point-to-point message.
  static constexpr int64_t kPiece = INT_MAX / 2;

  Status checkRoute(int peer, int tag) const {
    LOOM_RETURN_IF_ERROR(checkPeer(peer));
    // Every MPI allows tags up to 32767 (MPI_TAG_UB).
    if (tag < 0 || tag > 32767)
      return makeError("rank %d: tag %d is not in [0, 32767]", myRank, tag);
    return Status::ok();
  }

public:
  MpiCommunicator(MPI_Comm comm, bool owned) : comm(comm), owned(owned) {
    MPI_Comm_rank(comm, &myRank);
    MPI_Comm_size(comm, &mySize);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned && !finalized)
      MPI_Comm_free(&comm);
  }

  int rank() const override { return myRank; }
  int size() const override { return mySize; }

  Status allReduceSum(float *data, int64_t count) override {
    if (mySize == 1)
      return Status::ok();
    // MPI counts are ints: reduce in chunks.
    while (count > 0) {
      int chunk = static_cast<int>(std::min<int64_t>(count, INT_MAX / 2));
      int rc = MPI_Allreduce(MPI_IN_PLACE, data, chunk, MPI_FLOAT, MPI_SUM,
                             comm);
      if (rc != MPI_SUCCESS)
        return mpiError("MPI_Allreduce", rc);
      data += chunk;
      count -= chunk;
    }
    return Status::ok();
  }

  StatusOr<std::unique_ptr<PendingCollective>>
  startAllReduceSum(float *data, int64_t count) override {
    auto pending = std::make_unique<MpiPending>();
    // MPI counts are ints: one request per chunk.
    while (mySize > 1 && count > 0) {
      int chunk = static_cast<int>(std::min<int64_t>(count, INT_MAX / 2));
      MPI_Request request;
      int rc = MPI_Iallreduce(MPI_IN_PLACE, data, chunk, MPI_FLOAT, MPI_SUM,
                              comm, &request);
      if (rc != MPI_SUCCESS)
        return mpiError("MPI_Iallreduce", rc);
      pending->requests.push_back(request);
      data += chunk;
      count -= chunk;
    }
    return std::unique_ptr<PendingCollective>(std::move(pending));
  }

  Status allGather(const void *send, void *recv,
                   int64_t bytesPerRank) override {
    return inPieces(bytesPerRank, [&](int64_t at, int count,
                                      MPI_Datatype block) {
      int rc = MPI_Allgather(static_cast<const char *>(send) + at, count,
                             MPI_BYTE, static_cast<char *>(recv) + at,
                             block == MPI_BYTE ? count : 1, block, comm);
      return rc == MPI_SUCCESS ? Status::ok() : mpiError("MPI_Allgather", rc);
    });
  }

  Status reduceScatterSum(const float *send, float *recv,
                          int64_t countPerRank) override {
    if (countPerRank > INT_MAX)
      return makeError("reduce_scatter of %lld floats per rank is more than "
                       "MPI's int count",
                       (long long)countPerRank);
    int rc = MPI_Reduce_scatter_block(
        send, recv, static_cast<int>(countPerRank), MPI_FLOAT, MPI_SUM, comm);
    if (rc != MPI_SUCCESS)
      return mpiError("MPI_Reduce_scatter_block", rc);
    return Status::ok();
  }

  StatusOr<std::unique_ptr<PendingCollective>>
  startAllGather(const void *send, void *recv, int64_t bytesPerRank) override {
    auto pending = std::make_unique<MpiPending>();
    LOOM_RETURN_IF_ERROR(inPieces(bytesPerRank, [&](int64_t at, int count,
                                                    MPI_Datatype block) {
      pending->requests.emplace_back();
      int rc = MPI_Iallgather(static_cast<const char *>(send) + at, count,
                              MPI_BYTE, static_cast<char *>(recv) + at,
                              block == MPI_BYTE ? count : 1, block, comm,
                              &pending->requests.back());
      return rc == MPI_SUCCESS ? Status::ok() : mpiError("MPI_Iallgather", rc);
    }));
    return std::unique_ptr<PendingCollective>(std::move(pending));
  }

  StatusOr<std::unique_ptr<PendingCollective>>
  startReduceScatterSum(const float *send, float *recv,
                        int64_t countPerRank) override {
    if (countPerRank > INT_MAX)
      return makeError("reduce_scatter of %lld floats per rank is more than "
                       "MPI's int count",
                       (long long)countPerRank);
    auto pending = std::make_unique<MpiPending>();
    pending->requests.emplace_back();
    int rc = MPI_Ireduce_scatter_block(send, recv,
                                       static_cast<int>(countPerRank),
                                       MPI_FLOAT, MPI_SUM, comm,
                                       &pending->requests.back());
    if (rc != MPI_SUCCESS)
      return mpiError("MPI_Ireduce_scatter_block", rc);
    return std::unique_ptr<PendingCollective>(std::move(pending));
  }

  Status allToAll(const void *send, void *recv, int64_t bytesPerRank) override {
    return inPieces(bytesPerRank, [&](int64_t at, int count,
                                      MPI_Datatype block) {
      int n = block == MPI_BYTE ? count : 1;
      int rc = MPI_Alltoall(static_cast<const char *>(send) + at, n, block,
                            static_cast<char *>(recv) + at, n, block, comm);
      return rc == MPI_SUCCESS ? Status::ok() : mpiError("MPI_Alltoall", rc);
    });
  }

  StatusOr<std::unique_ptr<PendingCollective>>
  startSend(const void *data, int64_t bytes, int peer, int tag) override {
    LOOM_RETURN_IF_ERROR(checkRoute(peer, tag));
    auto pending = std::make_unique<MpiPending>();
    // MPI counts are ints: one message a piece, matched in order.
    for (int64_t at = 0; at < bytes; at += kPiece) {
      int n = static_cast<int>(std::min<int64_t>(bytes - at, kPiece));
      pending->requests.emplace_back();
      int rc = MPI_Isend(static_cast<const char *>(data) + at, n, MPI_BYTE,
                         peer, tag, comm, &pending->requests.back());
      if (rc != MPI_SUCCESS)
        return mpiError("MPI_Isend", rc);
    }
    return std::unique_ptr<PendingCollective>(std::move(pending));
  }

  Status recv(void *data, int64_t bytes, int peer, int tag) override {
    LOOM_RETURN_IF_ERROR(checkRoute(peer, tag));
    for (int64_t at = 0; at < bytes; at += kPiece) {
      int n = static_cast<int>(std::min<int64_t>(bytes - at, kPiece));
      MPI_Status status;
      int rc = MPI_Recv(static_cast<char *>(data) + at, n, MPI_BYTE, peer, tag,
                        comm, &status);
      if (rc != MPI_SUCCESS)
        return mpiError("MPI_Recv", rc);
      int got = 0;
      MPI_Get_count(&status, MPI_BYTE, &got);
      if (got != n)
        return makeError("rank %d expected %d bytes from rank %d (tag %d), "
                         "got %d",
                         myRank, n, peer, tag, got);
    }
    return Status::ok();
  }

  StatusOr<int> allReduceMin(int value) override {
    int out = value;
    int rc = MPI_Allreduce(&value, &out, 1, MPI_INT, MPI_MIN, comm);
    if (rc != MPI_SUCCESS)
      return mpiError("MPI_Allreduce", rc);
    return out;
  }

  Status barrier() override {
    int rc = MPI_Barrier(comm);
    if (rc != MPI_SUCCESS)
      return mpiError("MPI_Barrier", rc);
    return Status::ok();
  }

  Status broadcast(void *data, int64_t bytes, int root) override {
    char *p = static_cast<char *>(data);
    // MPI counts are ints: send in chunks.
    while (bytes > 0) {
      int chunk = static_cast<int>(std::min<int64_t>(bytes, INT_MAX / 2));
      int rc = MPI_Bcast(p, chunk, MPI_BYTE, root, comm);
      if (rc != MPI_SUCCESS)
        return mpiError("MPI_Bcast", rc);
      p += chunk;
      bytes -= chunk;
    }
    return Status::ok();
  }

  StatusOr<std::unique_ptr<Communicator>> split(int color, int key) override {
    MPI_Comm sub;
    int rc = MPI_Comm_split(comm, color, key, &sub);
    if (rc != MPI_SUCCESS)
      return mpiError("MPI_Comm_split", rc);
    MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
    return std::unique_ptr<Communicator>(new MpiCommunicator(sub, true));
  }

private:
  /// Runs `call(at, count, block)` over the `bytesPerRank` bytes that each
  /// rank's block of a gather or all-to-all has: once with `count` MPI_BYTEs
  /// when an int counts them, else per piece of at most 1 GiB at byte `at`
  /// of the block, `block` then being one piece of `count` bytes with the
  /// extent of a whole block (so rank `i`'s piece lies `i * bytesPerRank`
  /// further).
  template <typename F> static Status inPieces(int64_t bytesPerRank, F call) {
    if (bytesPerRank <= INT_MAX)
      return call(0, static_cast<int>(bytesPerRank), MPI_BYTE);
    constexpr int64_t kPiece = int64_t(1) << 30;
    for (int64_t at = 0; at < bytesPerRank; at += kPiece) {
      int count = static_cast<int>(std::min(kPiece, bytesPerRank - at));
      MPI_Datatype piece, block;
      int rc = MPI_Type_contiguous(count, MPI_BYTE, &piece);
      if (rc != MPI_SUCCESS)
        return mpiError("MPI_Type_contiguous", rc);
      rc = MPI_Type_create_resized(piece, 0, bytesPerRank, &block);
      MPI_Type_free(&piece);
      if (rc != MPI_SUCCESS)
        return mpiError("MPI_Type_create_resized", rc);
      rc = MPI_Type_commit(&block);
      Status s = rc == MPI_SUCCESS ? call(at, count, block)
                                   : mpiError("MPI_Type_commit", rc);
      MPI_Type_free(&block);
      LOOM_RETURN_IF_ERROR(s);
    }
    return Status::ok();
  }

  MPI_Comm comm;
  bool owned;
  int myRank = 0, mySize = 1;
};

} // namespace

bool launchedUnderMpi() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                          "PMI_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(var))
      return true;
  return false;
}

Status initializeMpi(int *argc, char ***argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    return Status::ok();
  int rc = MPI_Init(argc, argv);
  if (rc != MPI_SUCCESS)
    return makeError("MPI_Init failed (code %d)", rc);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return Status::ok();
}

void finalizeMpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Finalize();
}

std::unique_ptr<Communicator> createMpiWorld() {
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(MPI_COMM_WORLD, false));
}

} // namespace loom::runtime
