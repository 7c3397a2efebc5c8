//===- CalibrationTest.cpp - Calibration files on a cluster -----------------===//

#include "passes/planner/CostModel.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

using namespace mlir::loom;
using namespace mlir::loom::planner;

namespace {

std::string writeFile(const std::string &text) {
  llvm::SmallString<128> path;
  llvm::sys::fs::createTemporaryFile("calibration", "json", path);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  os << text;
  return std::string(path);
}

const char *kTwoRanks =
    R"({"loom_calibration": 1, "ranks": 2, "threads_per_rank": 1,
 "device": {"peak_tflops": {"fp32": 0.1, "bf16": 0.1}, "hbm_gbps": 16},
 "gemm": {"max_efficiency": 1, "half_dim": 4},
 "intra_node": {"bandwidth_gbps": 7, "latency_us": 0.5}})";

TEST(Calibration, ReplacesTheDatasheetFigures) {
  std::string path = writeFile(kTwoRanks);
  llvm::Expected<Cluster> c = parseCluster("cpu:2@" + path);
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->spec, "cpu:2@" + path);
  EXPECT_EQ(c->calibration, path);
  EXPECT_DOUBLE_EQ(c->peakTflopsFp32, 0.1);
  EXPECT_DOUBLE_EQ(c->hbmGBps, 16);
  EXPECT_DOUBLE_EQ(c->intraNode.bandwidthGBps, 7);
  EXPECT_DOUBLE_EQ(c->intraNode.latencyUs, 0.5);
  EXPECT_DOUBLE_EQ(c->efficiency.gemm(4, 4, 4), 0.125);
  // A file without `comm_overlap` leaves the datasheet's 1.
  EXPECT_DOUBLE_EQ(c->commOverlap, 1);
  // A product runs at its shape's share of the peak: the calibration's
  // curve, or the datasheet's (the joint search's `gemmSeconds` too).
  OpRecord op;
  op.flops = 2e9, op.gemmM = op.gemmN = op.gemmK = 4;
  EXPECT_DOUBLE_EQ(rooflineSeconds(op, *c), 2e9 / (0.1e12 * 0.125));
  llvm::Expected<Cluster> plain = parseCluster("cpu:2");
  ASSERT_TRUE(static_cast<bool>(plain));
  double share = plain->efficiency.gemm(4, 4, 4);
  EXPECT_DOUBLE_EQ(rooflineSeconds(op, *plain), 2e9 / (0.05e12 * share));
  EXPECT_DOUBLE_EQ(gemmSeconds(4, 4, 4, Precision::Fp32, *plain),
                   std::max(128 / (0.05e12 * share),
                            192 / (plain->hbmGBps * 1e9)));
}

TEST(Calibration, ProductsReadTheirOperandsAtTheMeasuredRate) {
  std::string text = kTwoRanks;
  text.insert(text.find("\"half_dim\": 4") + 13, ", \"operand_gbps\": 8");
  llvm::Expected<Cluster> c = parseCluster("cpu:2@" + writeFile(text));
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_DOUBLE_EQ(c->efficiency.gemmOperandGBps, 8);
  // The bytes at the operand rate, then the FLOPs at the shape's share.
  OpRecord op;
  op.flops = 2e9, op.bytes = 4e6, op.gemmM = op.gemmN = op.gemmK = 4;
  EXPECT_DOUBLE_EQ(rooflineSeconds(op, *c), 2e9 / (0.1e12 * 0.125) + 4e6 / 8e9);
  EXPECT_DOUBLE_EQ(gemmSeconds(4, 4, 4, Precision::Fp32, *c),
                   128 / (0.1e12 * 0.125) + 192 / 8e9);
  // An op without a product shape stays on the roofline.
  op.gemmK = 0;
  EXPECT_DOUBLE_EQ(rooflineSeconds(op, *c), 2e9 / 0.1e12);
  // A file without it keeps the roofline's overlap of bytes and FLOPs.
  llvm::Expected<Cluster> plain = parseCluster("cpu:2@" + writeFile(kTwoRanks));
  ASSERT_TRUE(static_cast<bool>(plain));
  EXPECT_DOUBLE_EQ(plain->efficiency.gemmOperandGBps, 0);
  op.gemmK = 4;
  EXPECT_DOUBLE_EQ(rooflineSeconds(op, *plain), 2e9 / (0.1e12 * 0.125));
}

TEST(Calibration, OnlyAStepThatOutgrowsTheCacheReadsOperandsFromMemory) {
  std::string text = kTwoRanks;
  text.insert(text.find("\"half_dim\": 4") + 13,
              ", \"operand_gbps\": 8, \"cache_mib\": 16");
  llvm::Expected<Cluster> c = parseCluster("cpu:2@" + writeFile(text));
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  const double mib = 1 << 20;
  EXPECT_DOUBLE_EQ(c->efficiency.gemmCacheBytes, 16 * mib);
  EXPECT_DOUBLE_EQ(operandColdShare(*c, 0), 1); // unknown: out of cache
  EXPECT_DOUBLE_EQ(operandColdShare(*c, 10 * mib), 0);
  EXPECT_DOUBLE_EQ(operandColdShare(*c, 16 * mib), 0);
  EXPECT_DOUBLE_EQ(operandColdShare(*c, 20 * mib), 0.25);
  EXPECT_DOUBLE_EQ(operandColdShare(*c, 32 * mib), 1);
  EXPECT_DOUBLE_EQ(operandColdShare(*c, 400 * mib), 1);

  // The step estimate reads its request's working set.
  StepRequest request;
  OpRecord op;
  op.kind = "matmul";
  op.flops = 2e9, op.bytes = 4e6, op.gemmM = op.gemmN = op.gemmK = 4;
  request.ops = {op, op};
  MeshTopology topology = MeshTopology::ppDpTp(1, 2, 1, 2);
  double compute = 2e9 / (0.1e12 * 0.125), reads = 4e6 / 8e9;
  request.workingSetBytes = 8 * mib;
  EXPECT_DOUBLE_EQ(estimateStep(request, *c, topology).stepSeconds,
                   2 * compute);
  request.workingSetBytes = 24 * mib;
  EXPECT_DOUBLE_EQ(estimateStep(request, *c, topology).stepSeconds,
                   2 * (compute + 0.5 * reads));
  request.workingSetBytes = 0;
  EXPECT_DOUBLE_EQ(estimateStep(request, *c, topology).stepSeconds,
                   2 * (compute + reads));
}

TEST(Calibration, ReadsTheMeasuredOverlap) {
  std::string text = kTwoRanks;
  text.insert(text.rfind('}'), ", \"comm_overlap\": 0.125");
  llvm::Expected<Cluster> c = parseCluster("cpu:2@" + writeFile(text));
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_DOUBLE_EQ(c->commOverlap, 0.125);
}

TEST(Calibration, CostsMeasuredKernelsAtTheirOwnRate) {
  std::string text = kTwoRanks;
  text.insert(text.rfind('}'),
              R"(, "kernel_call_us": 0.5, "kernels": {
  "gelu": {"call_us": 2, "gbps": 4, "up_to_bytes": 1e7},
  "mul:broadcast": {"call_us": 1, "gbps": 2},
  "attention": {"call_us": 3, "gflops": 10}})");
  llvm::Expected<Cluster> c = parseCluster("cpu:2@" + writeFile(text));
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  ASSERT_EQ(c->kernels.size(), 3u);
  EXPECT_DOUBLE_EQ(c->kernelCallSeconds, 0.5e-6);
  OpRecord gelu;
  gelu.kind = "gelu", gelu.bytes = 8e6, gelu.flops = 1e6;
  EXPECT_DOUBLE_EQ(rooflineSeconds(gelu, *c), 2e-6 + 8e6 / 4e9);
  // Beyond the bytes it was measured up to, no faster than memory (16 GB/s).
  OpRecord big = gelu;
  big.bytes = 1e9;
  EXPECT_DOUBLE_EQ(rooflineSeconds(big, *c), 2e-6 + 1e9 / 4e9);
  c->kernels["gelu"].bytesPerSecond = 64e9;
  EXPECT_DOUBLE_EQ(rooflineSeconds(big, *c), 2e-6 + 1e9 / 16e9);
  EXPECT_DOUBLE_EQ(rooflineSeconds(gelu, *c), 2e-6 + 8e6 / 64e9);
  c->kernels["gelu"].bytesPerSecond = 4e9;
  OpRecord attention;
  attention.kind = "attention", attention.bytes = 1e6, attention.flops = 1e9;
  attention.gemmM = attention.gemmN = 64, attention.gemmK = 32;
  EXPECT_DOUBLE_EQ(rooflineSeconds(attention, *c), 3e-6 + 1e9 / 10e9);
  // A broadcasting form takes its own curve where the file has one.
  OpRecord mul;
  mul.kind = "mul", mul.bytes = 8e6;
  EXPECT_DOUBLE_EQ(rooflineSeconds(mul, *c), 0.5e-6 + 8e6 / 16e9);
  mul.broadcast = true;
  EXPECT_DOUBLE_EQ(rooflineSeconds(mul, *c), 1e-6 + 8e6 / 2e9);
  // A kind the file did not measure: the roofline and the call overhead.
  OpRecord relu;
  relu.kind = "relu", relu.bytes = 16e6;
  EXPECT_DOUBLE_EQ(rooflineSeconds(relu, *c), 0.5e-6 + 16e6 / 16e9);
  // Without a calibration nothing of it applies.
  llvm::Expected<Cluster> plain = parseCluster("cpu:2");
  ASSERT_TRUE(static_cast<bool>(plain));
  EXPECT_TRUE(plain->kernels.empty());
  EXPECT_DOUBLE_EQ(rooflineSeconds(gelu, *plain), 8e6 / (plain->hbmGBps * 1e9));
}

TEST(Calibration, RefusesBadFilesInOneLine) {
  std::string good = kTwoRanks;
  auto without = [&](const std::string &what, const std::string &with) {
    std::string text = good;
    text.replace(text.find(what), what.size(), with);
    return text;
  };
  struct Case {
    std::string spec, text, message;
  } cases[] = {
      {"cpu:4", good, "measured with 2 rank(s) but 'cpu:4' has 4 a node"},
      {"cpu:2", "{", "invalid JSON"},
      {"cpu:2",
       without("\"latency_us\": 0.5}", "\"latency_us\": 0.5}, "
                                       "\"comm_overlap\": 1.5"),
       "'comm_overlap' must lie in [0, 1]"},
      {"cpu:2", "{\"ranks\": 2}", "not a calibration file"},
      {"cpu:2",
       without("\"hbm_gbps\": 16}",
               "\"hbm_gbps\": 16}, \"kernels\": {\"gelu\": "
               "{\"call_us\": 1}}"),
       "kernel 'gelu' needs a 'call_us' of at least 0, one positive rate"},
      {"cpu:2",
       without("\"hbm_gbps\": 16}",
               "\"hbm_gbps\": 16}, \"kernels\": {\"gelu\": "
               "{\"call_us\": 1, \"gbps\": 2, \"gflops\": 3}}"),
       "kernel 'gelu' needs"},
      {"cpu:2",
       without("\"hbm_gbps\": 16}",
               "\"hbm_gbps\": 16}, \"kernels\": {\"gelu\": "
               "{\"call_us\": 1, \"gbps\": 2, \"up_to_bytes\": -1}}"),
       "no negative 'up_to_bytes'"},
      {"cpu:2",
       without("\"hbm_gbps\": 16}",
               "\"hbm_gbps\": 16}, \"kernel_call_us\": -1"),
       "'kernel_call_us' must not be negative"},
      {"cpu:2", without("\"hbm_gbps\": 16", "\"hbm_gbps\": 0"),
       "missing or non-positive 'hbm_gbps'"},
      {"cpu:2", without("\"half_dim\": 4", "\"half_dim\": -1"),
       "missing or negative 'half_dim'"},
      {"cpu:2",
       without("\"half_dim\": 4", "\"half_dim\": 4, \"operand_gbps\": 0"),
       "missing or non-positive 'operand_gbps'"},
      {"cpu:2",
       without("\"half_dim\": 4", "\"half_dim\": 4, \"cache_mib\": -2"),
       "missing or non-positive 'cache_mib'"},
      {"cpu:2",
       without(R"(,
 "intra_node": {"bandwidth_gbps": 7, "latency_us": 0.5})",
               ""),
       "missing object 'intra_node'"},
  };
  for (const Case &k : cases) {
    std::string path = writeFile(k.text);
    llvm::Expected<Cluster> c = parseCluster(k.spec + "@" + path);
    ASSERT_FALSE(static_cast<bool>(c)) << k.message;
    std::string message = llvm::toString(c.takeError());
    EXPECT_NE(message.find(k.message), std::string::npos) << message;
    EXPECT_NE(message.find("loom-run --profile"), std::string::npos);
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
  llvm::Expected<Cluster> missing = parseCluster("cpu:2@/no/such/file.json");
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("cannot read it"),
            std::string::npos);
}

} // namespace
