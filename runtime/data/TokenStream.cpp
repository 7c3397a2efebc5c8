//===- TokenStream.cpp - Training windows of a token file -------*- C++ -*-===//

#include "runtime/data/TokenStream.h"

#include <cstring>

namespace loom::runtime {

StatusOr<TokenStream> openTokenStream(const std::string &path, DataType rawType,
                                      int64_t seq) {
  SampleArray all;
  bool npy = false;
  {
    LOOM_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file,
                          MappedFile::open(path));
    npy = file->size() >= 6 && std::memcmp(file->data(), "\x93NUMPY", 6) == 0;
    if (!npy) {
      all.name = path;
      all.type = rawType;
      int64_t size = dataTypeSize(rawType);
      if (file->size() % size != 0)
        return makeError("%s: %llu bytes is not a whole number of %s tokens; "
                         "pass --tokens-dtype for the type the file holds",
                         path.c_str(), (unsigned long long)file->size(),
                         dataTypeName(rawType));
      all.shape = {static_cast<int64_t>(file->size()) / size};
      all.base = file->data();
      all.mapped = file.get();
      all.owner = std::move(file);
    }
  }
  if (npy) {
    LOOM_ASSIGN_OR_RETURN(all, mapNpy(path));
    if (all.shape.size() != 1)
      return makeError("%s: a token .npy holds a 1-D array, not shape %s",
                       path.c_str(), shapeToString(all.shape).c_str());
    if (isFloat(all.type))
      return makeError("%s: tokens are integers, not %s", path.c_str(),
                       dataTypeName(all.type));
  }
  TokenStream out;
  out.tokens = all.shape[0];
  if (out.tokens < seq + 1)
    return makeError("%s: holds %lld token(s), fewer than one sample's %lld "
                     "(the plan's sequence of %lld and the next token)",
                     path.c_str(), (long long)out.tokens, (long long)seq + 1,
                     (long long)seq);
  int64_t windows = (out.tokens - 1) / seq;
  for (int64_t shift : {0, 1}) {
    SampleArray &view = shift == 0 ? out.inputs : out.targets;
    view = all;
    view.shape = {windows, seq};
    view.strideElems = seq;
    view.firstToken = shift;
    view.base = all.base + shift * dataTypeSize(all.type);
  }
  return out;
}

} // namespace loom::runtime
