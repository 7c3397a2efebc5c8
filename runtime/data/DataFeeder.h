//===- DataFeeder.h - Slice data files into INPUT/TARGET buffers -*- C++ -*-===//
//
// At step i (0-based) the global batch is positions [i*B, (i+1)*B) of the
// run's data (B = training.global_batch); a `SampleOrder` says which sample
// each position reads, the same one for every binding. On a rank with
// data-parallel coordinate d, a buffer of shape [b, ...] with sample_offset o
// receives positions [i*B + d*b + o, +b).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DATA_DATAFEEDER_H
#define LOOM_RUNTIME_DATA_DATAFEEDER_H

#include "runtime/data/SampleArray.h"
#include "runtime/data/SampleOrder.h"
#include "runtime/plan.pb.h"
#include "runtime/support/Status.h"

#include <map>
#include <set>
#include <string>

namespace loom::runtime {

/// The INPUT and TARGET bindings of every program of `plan`.
std::set<std::string> dataBindings(const plan::Plan &plan);

/// The number of classes when `b` is the target of a cross_entropy op in
/// `program`, else 0.
int64_t crossEntropyClasses(const plan::Program &program,
                            const plan::Buffer &b);

/// The classes of the plan's `cross_entropy` (its logits' last dimension,
/// in the first program that has one), else 0: what the target's class ids
/// index, wherever the plan takes the target (it may slice it first), and a
/// language model's vocabulary.
int64_t planClasses(const plan::Plan &plan);

/// Checks `data` for `binding` against every INPUT/TARGET buffer bound to it
/// in any program: at least one sample and trailing dims equal to the
/// buffer's. Any `DataType` converts to an f32 or i64 buffer; the values
/// themselves are checked as they are fed (`feedSamples`).
Status checkBindingData(const plan::Plan &plan, const std::string &binding,
                        const SampleArray &data);

/// Checks a complete set of named data: every binding has data, no name is
/// unknown, each array passes `checkBindingData`, and all hold the same
/// number of samples (sample k of every binding is one example). `flag`
/// names the option that gives the data, in errors.
Status checkPlanData(const plan::Plan &plan,
                     const std::map<std::string, SampleArray> &data,
                     const char *flag = "--data");

/// Fails, naming both files, when `a` (for `bindingA`) and `b` hold
/// different numbers of samples.
Status sameSamples(const std::string &bindingA, const SampleArray &a,
                   const std::string &bindingB, const SampleArray &b);

/// The global position of the first sample `b` receives at `step` on
/// `rank`; -1 where it would not fit an int64.
int64_t firstSample(const plan::Plan &plan, const plan::Buffer &b, int64_t step,
                    int rank);

/// The samples [first, first + count) of an array of `length` samples, as
/// read modulo the length: "sample 57", "samples 56..63", or
/// "samples 60..63, 0..3" where the range wraps; every sample when `count`
/// covers the array.
std::string sampleRangeText(int64_t first, int64_t count, int64_t length);

/// Copies `b`'s samples for `step` out of `data`, in `order`, into `dst`
/// (the buffer's memory), converting to the buffer's type (`copySample`).
/// With `limit` > 0 every value must lie in [0, limit): the classes of a
/// cross-entropy target, a token stream's vocabulary. `data` must have
/// passed `checkBindingData`. Errors name the file and the value's place.
Status feedSamples(const plan::Plan &plan, const plan::Buffer &b,
                   const SampleArray &data, const SampleOrder &order,
                   int64_t step, int rank, uint8_t *dst, int64_t limit = 0);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DATA_DATAFEEDER_H
