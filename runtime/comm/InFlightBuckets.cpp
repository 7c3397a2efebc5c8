//===- InFlightBuckets.cpp - Buckets started and not waited for -*- C++ -*-===//

#include "runtime/comm/InFlightBuckets.h"

#include <string>

namespace loom::runtime {

Status InFlightBuckets::put(int64_t bucket,
                            std::unique_ptr<PendingCollective> collective) {
  if (!inFlight.emplace(bucket, std::move(collective)).second)
    return makeError("bucket %lld is started again before its wait",
                     (long long)bucket);
  return Status::ok();
}

Status InFlightBuckets::wait(int64_t bucket) {
  auto it = inFlight.find(bucket);
  if (it == inFlight.end())
    return makeError("bucket %lld is waited for but was not started",
                     (long long)bucket);
  std::unique_ptr<PendingCollective> collective = std::move(it->second);
  inFlight.erase(it);
  return collective->wait();
}

Status InFlightBuckets::progress() {
  // A finished collective's test is a cheap `true`; it stays until its
  // wait.
  for (auto &[bucket, collective] : inFlight)
    LOOM_RETURN_IF_ERROR(collective->test().status());
  for (auto &send : sends)
    LOOM_RETURN_IF_ERROR(send->test().status());
  return Status::ok();
}

Status InFlightBuckets::finishStep() {
  Status sent = Status::ok();
  for (auto &send : sends)
    if (Status s = send->wait(); !s.isOk() && sent.isOk())
      sent = s;
  sends.clear();
  LOOM_RETURN_IF_ERROR(sent);
  if (inFlight.empty())
    return Status::ok();
  std::string names;
  for (auto &[bucket, collective] : inFlight) {
    names += (names.empty() ? "" : ", ") + std::to_string(bucket);
    (void)collective->wait();
  }
  inFlight.clear();
  return makeError("the step ended with bucket(s) %s started and never "
                   "waited for",
                   names.c_str());
}

} // namespace loom::runtime
