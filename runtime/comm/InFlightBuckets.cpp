//===- InFlightBuckets.cpp - Buckets started and not waited for -*- C++ -*-===//

#include "runtime/comm/InFlightBuckets.h"

#include <string>

namespace loom::runtime {

Status InFlightBuckets::put(int64_t bucket,
                            std::unique_ptr<PendingCollective> collective) {
  if (inFlight.count(bucket) || finished.count(bucket))
    return makeError("bucket %lld is started again before its wait",
                     (long long)bucket);
  inFlight[bucket] = std::move(collective);
  return Status::ok();
}

Status InFlightBuckets::wait(int64_t bucket) {
  if (finished.erase(bucket))
    return Status::ok();
  auto it = inFlight.find(bucket);
  if (it == inFlight.end())
    return makeError("bucket %lld is waited for but was not started",
                     (long long)bucket);
  std::unique_ptr<PendingCollective> collective = std::move(it->second);
  inFlight.erase(it);
  return collective->wait();
}

Status InFlightBuckets::progress() {
  for (auto it = inFlight.begin(); it != inFlight.end();) {
    LOOM_ASSIGN_OR_RETURN(bool done, it->second->test());
    if (!done) {
      ++it;
      continue;
    }
    finished[it->first] = true;
    it = inFlight.erase(it);
  }
  return Status::ok();
}

Status InFlightBuckets::expectEmpty() {
  if (inFlight.empty() && finished.empty())
    return Status::ok();
  std::string names;
  for (const auto &[bucket, _] : inFlight)
    names += (names.empty() ? "" : ", ") + std::to_string(bucket);
  for (const auto &[bucket, _] : finished)
    names += (names.empty() ? "" : ", ") + std::to_string(bucket);
  for (auto &[bucket, collective] : inFlight)
    (void)collective->wait();
  inFlight.clear();
  finished.clear();
  return makeError("the step ended with bucket(s) %s started and never "
                   "waited for",
                   names.c_str());
}

} // namespace loom::runtime
