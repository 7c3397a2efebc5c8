//===- DataFeeder.h - Slice data files into INPUT/TARGET buffers ---*- C++ -*-===//
//
// At step i (0-based) the global batch is samples [i*B, (i+1)*B) of every
// data array, modulo its length (B = training.global_batch). On a rank with
// data-parallel coordinate d, a buffer of shape [b, ...] with sample_offset o
// receives samples [i*B + d*b + o, +b).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DATA_DATAFEEDER_H
#define LOOM_RUNTIME_DATA_DATAFEEDER_H

#include "runtime/plan.pb.h"
#include "runtime/support/HostTensor.h"
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

/// Checks `data` for `binding` against every INPUT/TARGET buffer bound to it
/// in any program: at least one sample, trailing dims equal to the buffer's,
/// a convertible dtype (f32/f64 for f32 buffers, i32/i64 for i64 buffers),
/// and class ids in range where the buffer is a `cross_entropy` target.
Status checkBindingData(const plan::Plan &plan, const std::string &binding,
                        const HostTensor &data);

/// Checks a complete set of named data: every binding has data, no name is
/// unknown, and each array passes `checkBindingData`.
Status checkPlanData(const plan::Plan &plan,
                     const std::map<std::string, HostTensor> &data);

/// The global sample index of the first sample `b` receives at `step` on
/// `rank`.
int64_t firstSample(const plan::Plan &plan, const plan::Buffer &b,
                    int64_t step, int rank);

/// The samples [first, first + count) of an array of `length` samples, as
/// read modulo the length: "sample 57", "samples 56..63", or
/// "samples 60..63, 0..3" where the range wraps; every sample when `count`
/// covers the array.
std::string sampleRangeText(int64_t first, int64_t count, int64_t length);

/// Copies `b`'s samples for `step` out of `data` into `dst` (the buffer's
/// memory), converting f64->f32 and i32->i64. `data` must have passed
/// `checkBindingData`.
void feedSamples(const plan::Plan &plan, const plan::Buffer &b,
                 const HostTensor &data, int64_t step, int rank, uint8_t *dst);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DATA_DATAFEEDER_H
