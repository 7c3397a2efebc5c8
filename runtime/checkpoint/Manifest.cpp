//===- Manifest.cpp - A checkpoint's manifest.json ------------------------===//

#include "runtime/checkpoint/Manifest.h"

#include "runtime/support/Checksum.h"

#include <google/protobuf/util/json_util.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace loom::runtime {

/// The checksum of `manifest` with its `checksum` empty, over its
/// deterministic binary form (JSON's spacing does not count).
static StatusOr<std::string> manifestChecksum(checkpoint::Manifest manifest) {
  manifest.clear_checksum();
  return messageChecksum(manifest);
}

StatusOr<std::string> manifestToJson(checkpoint::Manifest manifest) {
  LOOM_ASSIGN_OR_RETURN(std::string sum, manifestChecksum(manifest));
  manifest.set_checksum(sum);
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  auto status =
      google::protobuf::util::MessageToJsonString(manifest, &json, options);
  if (!status.ok())
    return makeError("cannot write a checkpoint manifest as JSON: %s",
                     status.ToString().c_str());
  return json;
}

StatusOr<checkpoint::Manifest> readManifest(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return makeError("%s: cannot open it: %s (a missing or incomplete "
                     "checkpoint)",
                     path.c_str(), std::strerror(errno));
  // A manifest is a few bytes a tensor; a larger file is not one.
  constexpr std::streamoff kLimit = std::streamoff(1) << 30;
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  in.seekg(0);
  if (size < 0 || size > kLimit)
    return makeError("%s: %lld bytes is not a checkpoint manifest",
                     path.c_str(), (long long)size);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), size);
  if (!in)
    return makeError("%s: cannot read it", path.c_str());
  checkpoint::Manifest manifest;
  google::protobuf::util::JsonParseOptions options;
  auto status =
      google::protobuf::util::JsonStringToMessage(text, &manifest, options);
  if (!status.ok()) {
    std::string why = status.ToString();
    for (char &c : why)
      if (c == '\n')
        c = ' ';
    return makeError("%s: not a checkpoint manifest (%s)", path.c_str(),
                     why.c_str());
  }
  if (manifest.format_version() != kCheckpointFormatVersion)
    return makeError("%s: checkpoint format version %u; this loom-run reads "
                     "version %u",
                     path.c_str(), manifest.format_version(),
                     kCheckpointFormatVersion);
  LOOM_ASSIGN_OR_RETURN(std::string sum, manifestChecksum(manifest));
  if (sum != manifest.checksum())
    return makeError("%s: the manifest's checksum %s does not match its "
                     "contents (%s): the manifest changed after it was "
                     "written",
                     path.c_str(), manifest.checksum().c_str(), sum.c_str());
  return manifest;
}

} // namespace loom::runtime
