//===- AtomicFileTest.cpp - Whole files, one writer at a time -------------===//

#include "runtime/support/AtomicFile.h"
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

} // namespace
