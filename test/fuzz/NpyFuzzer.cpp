//===- NpyFuzzer.cpp - Fuzz target: the .npy readers ----------------------===//
//
// Bytes as a .npy file, through both readers: `parseNpy` (a whole file in
// memory, `--forward --input`) and `mapNpy` (the memory-mapped data files
// of training, over an in-memory file), then every sample of a mapped file
// converted to the plan's two data types as a feed converts it.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Npy.h"
#include "runtime/data/SampleArray.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using namespace loom::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  (void)parseNpy(bytes, "fuzz.npy");

  int fd = memfd_create("fuzz.npy", 0);
  if (fd < 0)
    return 0;
  if (write(fd, data, size) == static_cast<ssize_t>(size)) {
    StatusOr<SampleArray> array =
        mapNpy("/proc/self/fd/" + std::to_string(fd));
    // A file of 4 KiB holds at most 4096 one-byte samples, but samples of
    // no elements may be claimed by the billion: a feed reads a batch.
    if (array && array->perSample() <= 4096) {
      std::vector<uint8_t> sample(array->perSample() * 8);
      for (int64_t i = 0; i < std::min<int64_t>(array->samples(), 4096); ++i)
        for (loom::plan::DType type : {loom::plan::F32, loom::plan::I64})
          (void)copySample(*array, i, type, sample.data(), 10);
    }
  }
  close(fd);
  return 0;
}
