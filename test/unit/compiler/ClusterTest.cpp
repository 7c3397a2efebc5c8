//===- ClusterTest.cpp - Cluster presets and files ------------------------===//

#include "passes/planner/Cluster.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir::loom;

namespace {

std::string errorOf(llvm::StringRef spec) {
  auto c = parseCluster(spec);
  if (c)
    return "";
  return llvm::toString(c.takeError());
}

TEST(Cluster, Presets) {
  auto cpu = parseCluster("cpu:4");
  ASSERT_TRUE(static_cast<bool>(cpu));
  EXPECT_EQ(cpu->numDevices(), 4);
  auto h200 = parseCluster("h200:2x8");
  ASSERT_TRUE(static_cast<bool>(h200));
  EXPECT_EQ(h200->nodes, 2);
  EXPECT_EQ(h200->numDevices(), 16);
  EXPECT_GT(h200->memoryGiB, 100);
  // GPUs keep a reserve no plan places; CPU ranks none.
  EXPECT_DOUBLE_EQ(h200->reserveGiB, 1);
  EXPECT_DOUBLE_EQ(h200->usableMemoryBytes(),
                   h200->memoryBytes() - 1024.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(cpu->usableMemoryBytes(), cpu->memoryBytes());
}

TEST(Cluster, BadSpecsSayWhy) {
  EXPECT_NE(errorOf("tpu:4").find("unknown preset 'tpu'"), std::string::npos);
  EXPECT_NE(errorOf("cpu:0").find("not a positive rank count"),
            std::string::npos);
  EXPECT_NE(errorOf("h100:8").find("expected NODESxGPUS"), std::string::npos);
  EXPECT_NE(errorOf("/nonexistent/c.json").find("cannot read the file"),
            std::string::npos);
}

TEST(Cluster, JsonFile) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("cluster", "json", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << R"({"nodes":2,"devices_per_node":4,"device":{"name":"X","memory_gib":40,
      "peak_tflops":{"fp32":10,"bf16":100},"hbm_gbps":1000},
      "intra_node":{"bandwidth_gbps":100,"latency_us":2},
      "inter_node":{"bandwidth_gbps":10,"latency_us":8}})";
  }
  auto c = parseCluster(path);
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->numDevices(), 8);
  EXPECT_DOUBLE_EQ(c->interNode.bandwidthGBps, 10);
  EXPECT_EQ(c->deviceName, "X");
  // A GPU-sized device keeps the GPU reserve unless the file gives one.
  EXPECT_DOUBLE_EQ(c->reserveGiB, 1);

  for (auto [reserve, want] : {std::pair{"0", ""}, {"40", "'reserve_gib'"},
                               {"-1", "'reserve_gib'"}}) {
    {
      std::error_code ec;
      llvm::raw_fd_ostream os(path, ec);
      os << R"({"nodes":1,"devices_per_node":1,"device":{"memory_gib":40,"reserve_gib":)"
         << reserve << R"(,"peak_tflops":{"fp32":10,"bf16":100}},
        "intra_node":{"bandwidth_gbps":100}})";
    }
    std::string err = errorOf(path);
    if (*want == 0) {
      auto r = parseCluster(path);
      ASSERT_TRUE(static_cast<bool>(r));
      EXPECT_DOUBLE_EQ(r->usableMemoryBytes(), r->memoryBytes());
    } else {
      EXPECT_NE(err.find(want), std::string::npos) << reserve << ": " << err;
    }
  }

  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << R"({"nodes":1,"devices_per_node":4,"device":{"memory_gib":40}})";
  }
  std::string err = errorOf(path);
  EXPECT_NE(err.find("'fp32'"), std::string::npos) << err;
  llvm::sys::fs::remove(path);
}

} // namespace
