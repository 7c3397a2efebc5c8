//===- Checksum.cpp - Checksums of plans and model files ------------------===//

#include "runtime/support/Checksum.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message_lite.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace loom::runtime {

uint64_t fnv1a64(std::string_view bytes, uint64_t state) {
  for (unsigned char c : bytes) {
    state ^= c;
    state *= 0x100000001b3ull;
  }
  return state;
}

std::string checksumText(uint64_t value) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(value));
  return std::string("fnv1a64:") + hex;
}

bool serializeDeterministically(const google::protobuf::MessageLite &message,
                                std::string &bytes) {
  bytes.clear();
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  return message.SerializeToCodedStream(&coded);
}

StatusOr<std::string>
messageChecksum(const google::protobuf::MessageLite &message) {
  std::string bytes;
  if (!serializeDeterministically(message, bytes))
    return makeError("cannot serialize a %s", message.GetTypeName().c_str());
  return checksumText(fnv1a64(bytes));
}

StatusOr<std::string> fileChecksum(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return makeError("cannot open '%s': %s", path.c_str(),
                     std::strerror(errno));
  std::vector<char> block(1 << 20);
  uint64_t state = fnv1a64({});
  while (in) {
    in.read(block.data(), block.size());
    state = fnv1a64({block.data(), static_cast<size_t>(in.gcount())}, state);
  }
  if (in.bad())
    return makeError("cannot read '%s'", path.c_str());
  return checksumText(state);
}

} // namespace loom::runtime
