//===- ThreadCommunicator.cpp - Ranks as threads of one process -----------===//

#include "runtime/comm/ThreadCommunicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>

namespace loom::runtime {
namespace {

/// What the ranks of one (sub-)world share.
struct ThreadMeeting {
  explicit ThreadMeeting(int n) : n(n), posted(n), colorKey(n) {}

  /// Returns when all `n` ranks have arrived (reusable).
  void arrive() {
    std::unique_lock<std::mutex> lock(mutex);
    int64_t gen = generation;
    if (++arrived == n) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return generation != gen; });
  }

  int n;
  std::mutex mutex;
  std::condition_variable cv;
  int arrived = 0;
  int64_t generation = 0;
  std::vector<const void *> posted;
  std::vector<std::pair<int, int>> colorKey;
  std::map<int, std::shared_ptr<ThreadMeeting>> children;

  /// Point-to-point messages not received yet, by (from, to, tag), in the
  /// order they were sent.
  std::mutex mailMutex;
  std::condition_variable mailCv;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> mail;
};

class ThreadCommunicator final : public Communicator {
public:
  ThreadCommunicator(std::shared_ptr<ThreadMeeting> meeting, int rank)
      : meeting(std::move(meeting)), myRank(rank) {}

  int rank() const override { return myRank; }
  int size() const override { return meeting->n; }

  Status allReduceSum(float *data, int64_t count) override {
    std::vector<float> sum(static_cast<size_t>(count), 0.0f);
    exchange(data, [&] {
      for (int r = 0; r < size(); ++r)
        for (int64_t i = 0; i < count; ++i)
          sum[i] += static_cast<const float *>(meeting->posted[r])[i];
    });
    std::copy(sum.begin(), sum.end(), data);
    return Status::ok();
  }
  Status allGather(const void *send, void *recv,
                   int64_t bytesPerRank) override {
    exchange(send, [&] {
      for (int r = 0; r < size(); ++r)
        std::memcpy(static_cast<char *>(recv) + r * bytesPerRank,
                    meeting->posted[r], bytesPerRank);
    });
    return Status::ok();
  }
  Status reduceScatterSum(const float *send, float *recv,
                          int64_t countPerRank) override {
    exchange(send, [&] {
      for (int64_t i = 0; i < countPerRank; ++i) {
        float sum = 0;
        for (int r = 0; r < size(); ++r)
          sum += static_cast<const float *>(
              meeting->posted[r])[myRank * countPerRank + i];
        recv[i] = sum;
      }
    });
    return Status::ok();
  }
  Status allToAll(const void *send, void *recv, int64_t bytesPerRank) override {
    exchange(send, [&] {
      for (int r = 0; r < size(); ++r)
        std::memcpy(static_cast<char *>(recv) + r * bytesPerRank,
                    static_cast<const char *>(meeting->posted[r]) +
                        myRank * bytesPerRank,
                    bytesPerRank);
    });
    return Status::ok();
  }
  StatusOr<int> allReduceMin(int value) override {
    int out = value;
    exchange(&value, [&] {
      for (int r = 0; r < size(); ++r)
        out = std::min(out, *static_cast<const int *>(meeting->posted[r]));
    });
    return out;
  }
  Status barrier() override {
    meeting->arrive();
    return Status::ok();
  }
  // A send is copied into the receiver's mailbox at once: done on return.
  StatusOr<std::unique_ptr<PendingCollective>>
  startSend(const void *data, int64_t bytes, int peer, int tag) override {
    LOOM_RETURN_IF_ERROR(checkPeer(peer));
    const char *from = static_cast<const char *>(data);
    {
      std::lock_guard<std::mutex> lock(meeting->mailMutex);
      meeting->mail[{myRank, peer, tag}].emplace_back(from, from + bytes);
    }
    meeting->mailCv.notify_all();
    return std::unique_ptr<PendingCollective>(new FinishedCollective());
  }
  Status recv(void *data, int64_t bytes, int peer, int tag) override {
    LOOM_RETURN_IF_ERROR(checkPeer(peer));
    std::unique_lock<std::mutex> lock(meeting->mailMutex);
    auto &box = meeting->mail[{peer, myRank, tag}];
    meeting->mailCv.wait(lock, [&] { return !box.empty(); });
    std::vector<char> message = std::move(box.front());
    box.pop_front();
    if (box.empty())
      meeting->mail.erase({peer, myRank, tag});
    if (static_cast<int64_t>(message.size()) != bytes)
      return makeError("rank %d expected %lld bytes from rank %d (tag %d), "
                       "got %lld",
                       myRank, (long long)bytes, peer, tag,
                       (long long)message.size());
    std::memcpy(data, message.data(), message.size());
    return Status::ok();
  }
  Status broadcast(void *data, int64_t bytes, int root) override {
    exchange(data, [&] {
      if (myRank != root)
        std::memcpy(data, meeting->posted[root], bytes);
    });
    return Status::ok();
  }
  StatusOr<std::unique_ptr<Communicator>> split(int color, int key) override {
    meeting->colorKey[myRank] = {color, key};
    meeting->arrive();
    // The members of this color, ordered by key (then by rank, as MPI).
    std::vector<std::pair<int, int>> members;
    for (int r = 0; r < size(); ++r)
      if (meeting->colorKey[r].first == color)
        members.push_back({meeting->colorKey[r].second, r});
    std::sort(members.begin(), members.end());
    int subRank = 0;
    while (members[subRank].second != myRank)
      ++subRank;
    std::shared_ptr<ThreadMeeting> sub;
    {
      std::lock_guard<std::mutex> lock(meeting->mutex);
      auto &slot = meeting->children[color];
      if (!slot)
        slot = std::make_shared<ThreadMeeting>(int(members.size()));
      sub = slot;
    }
    meeting->arrive();
    if (myRank == 0)
      meeting->children.clear(); // every member holds its sub-meeting
    meeting->arrive();
    return std::unique_ptr<Communicator>(
        new ThreadCommunicator(std::move(sub), subRank));
  }

private:
  /// Posts `mine`, runs `read` once every rank has posted, and returns once
  /// every rank has read.
  template <typename F> void exchange(const void *mine, F read) {
    meeting->posted[myRank] = mine;
    meeting->arrive();
    read();
    meeting->arrive();
  }

  std::shared_ptr<ThreadMeeting> meeting;
  int myRank;
};

} // namespace

std::vector<std::string>
runRanks(int n, const std::function<Status(Communicator &)> &body) {
  auto meeting = std::make_shared<ThreadMeeting>(n);
  std::vector<std::string> failures(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadCommunicator world(meeting, r);
      Status s = body(world);
      if (!s.isOk())
        failures[r] = s.message();
    });
  for (std::thread &t : threads)
    t.join();
  return failures;
}

} // namespace loom::runtime
