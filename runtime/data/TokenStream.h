//===- TokenStream.h - Training windows of a token file ---------*- C++ -*-===//
//
// `loom-run --tokens FILE`: a tokenized corpus as one stream of token ids,
// the format nanoGPT's and Megatron-style preprocessors write — raw
// little-endian uint16 or uint32 values, or a 1-D integer `.npy`. With the
// sequence length s of the plan's input, sample k is the window of s + 1
// tokens starting at token k*s: its first s tokens are the input ids, its
// last s the target (the next token of each). Windows share their boundary
// token, so (T - 1) div s windows cover T tokens, as in the model zoo's data.
// Both are views into the mapped file: nothing is copied or preprocessed.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DATA_TOKENSTREAM_H
#define LOOM_RUNTIME_DATA_TOKENSTREAM_H

#include "runtime/data/SampleArray.h"

namespace loom::runtime {

struct TokenStream {
  int64_t tokens = 0;
  SampleArray inputs;  // [windows, s]: tokens [k*s, k*s + s)
  SampleArray targets; // [windows, s]: tokens [k*s + 1, k*s + s]
};

/// Maps `path` and cuts it into windows of `seq` + 1 tokens. A raw file
/// holds `rawType` values (U16 or U32); an `.npy` file (known by its magic
/// bytes) says its own type, which must be an integer type, and must be
/// 1-D. Refuses a file too short for one window and a raw file whose size is
/// not a whole number of tokens.
StatusOr<TokenStream> openTokenStream(const std::string &path, DataType rawType,
                                      int64_t seq);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DATA_TOKENSTREAM_H
