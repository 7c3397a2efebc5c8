//===- AtomicFileTest.cpp - Whole files, one writer, checksums ------------===//

#include "runtime/support/AtomicFile.h"
#include "runtime/support/Checksum.h"
#include "runtime/Metrics.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace loom::runtime;
namespace fs = std::filesystem;

namespace {

std::string dirFor(const std::string &name) {
  fs::path dir = fs::path(::testing::TempDir()) /
                 ("atomic_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string contents(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ChecksumTest, Fnv1a64KnownValues) {
  // The FNV-1a reference values (Fowler, Noll, Vo).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  // Running: in pieces as at once.
  EXPECT_EQ(fnv1a64("bar", fnv1a64("foo")), fnv1a64("foobar"));
  EXPECT_EQ(checksumText(0xaf63dc4c8601ec8cull), "fnv1a64:af63dc4c8601ec8c");
}

TEST(ChecksumTest, FileChecksumReadsTheWholeFile) {
  std::string path = dirFor("sum") + "/f";
  std::string bytes(3 << 20, 'x'); // over three read blocks
  bytes[(2 << 20) + 5] = 'y';
  std::ofstream(path, std::ios::binary) << bytes;
  StatusOr<std::string> sum = fileChecksum(path);
  ASSERT_TRUE(sum.isOk()) << sum.status().message();
  EXPECT_EQ(*sum, checksumText(fnv1a64(bytes)));
  std::remove(path.c_str());
  EXPECT_FALSE(fileChecksum(path).isOk());
}

TEST(AtomicFileTest, ReplacesWholeAndLeavesNoTemporary) {
  std::string dir = dirFor("replace");
  std::string path = dir + "/model.onnx";
  ASSERT_TRUE(writeFileAtomically(path, "first").isOk());
  ASSERT_TRUE(writeFileAtomically(path, "second, longer").isOk());
  EXPECT_EQ(contents(path), "second, longer");
  EXPECT_EQ(
      std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  Status missing = writeFileAtomically(dir + "/no/such/dir/x", "x");
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("cannot create '" + dir + "/no/such/dir/x'"),
            std::string::npos)
      << missing.message();
}

TEST(AtomicFileTest, TwoWritersLeaveOneWholeFile) {
  std::string path = dirFor("race") + "/out.bin";
  std::string a(1 << 20, 'a'), b(1 << 20, 'b');
  auto writer = [&](const std::string &bytes) {
    for (int i = 0; i < 20; ++i)
      ASSERT_TRUE(writeFileAtomically(path, bytes).isOk());
  };
  std::thread ta(writer, a), tb(writer, b);
  ta.join();
  tb.join();
  std::string got = contents(path);
  EXPECT_TRUE(got == a || got == b) << "a mix of both writers";
}

TEST(MetricsWriterTest, ASecondWriterOfOneFileIsRefused) {
  std::string path = dirFor("metrics") + "/m.jsonl";
  StatusOr<std::unique_ptr<MetricsWriter>> first = MetricsWriter::open(path);
  ASSERT_TRUE(first.isOk()) << first.status().message();
  StatusOr<std::unique_ptr<MetricsWriter>> second = MetricsWriter::open(path);
  ASSERT_FALSE(second.isOk());
  EXPECT_NE(second.status().message().find("is being written by another run"),
            std::string::npos);
  StepMetrics m;
  m.step = 1;
  ASSERT_TRUE((*first)->write(m).isOk());
  first->reset(); // closed: the lock is gone, and a new run starts the file
                  // again
  StatusOr<std::unique_ptr<MetricsWriter>> third = MetricsWriter::open(path);
  ASSERT_TRUE(third.isOk());
  EXPECT_EQ(contents(path), "");
}

TEST(MetricsWriterTest, AResumedRunKeepsTheLinesBeforeItsStep) {
  std::string path = dirFor("metrics_resume") + "/m.jsonl";
  {
    auto first = MetricsWriter::open(path);
    ASSERT_TRUE(first.isOk()) << first.status().message();
    for (int64_t step = 1; step <= 4; ++step) {
      StepMetrics m;
      m.step = step;
      ASSERT_TRUE((*first)->write(m).isOk());
    }
  }
  // A line cut by a kill is dropped with those after the resumed step.
  {
    std::ofstream out(path, std::ios::app);
    out << "{\"step\":5,\"lo";
  }
  std::string before = contents(path);
  size_t third = before.find("{\"step\":3,");
  ASSERT_NE(third, std::string::npos);
  auto resumed = MetricsWriter::open(path, 2);
  ASSERT_TRUE(resumed.isOk()) << resumed.status().message();
  EXPECT_EQ(contents(path), before.substr(0, third));
  StepMetrics m;
  m.step = 3;
  ASSERT_TRUE((*resumed)->write(m).isOk());
  resumed->reset();
  EXPECT_EQ(contents(path), before.substr(0, third) + formatMetrics(m) + "\n");
  // Resumed at step 0 (no checkpoint yet): the file starts again.
  ASSERT_TRUE(MetricsWriter::open(path, 0).isOk());
  EXPECT_EQ(contents(path), "");
}

} // namespace
