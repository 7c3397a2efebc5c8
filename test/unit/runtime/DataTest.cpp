//===- DataTest.cpp - Mapped data files, token streams, sample orders -----===//

#include "NpyImage.h"
#include "runtime/data/SampleArray.h"
#include "runtime/data/SampleOrder.h"
#include "runtime/data/TokenStream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

template <typename T> std::string rawBytes(const std::vector<T> &values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(T));
}

/// Maps an .npy file of shape (n, k) with `descr` holding `data`.
SampleArray mapped(const std::string &name, const std::string &descr,
                   const std::string &shape, const std::string &data) {
  std::string path = tempPath(name);
  writeRaw(path,
           npyImage("{'descr': '" + descr +
                        "', 'fortran_order': False, 'shape': " + shape + ", }",
                    data));
  StatusOr<SampleArray> a = mapNpy(path);
  EXPECT_TRUE(a.isOk()) << a.status().message();
  return a.isOk() ? std::move(a).value() : SampleArray();
}

std::vector<float> asF32(const SampleArray &a, int64_t i) {
  std::vector<float> out(a.perSample());
  EXPECT_TRUE(
      copySample(a, i, loom::plan::F32, reinterpret_cast<uint8_t *>(out.data()))
          .isOk());
  return out;
}

StatusOr<std::vector<int64_t>> asI64(const SampleArray &a, int64_t i,
                                     int64_t limit = 0) {
  std::vector<int64_t> out(a.perSample());
  Status s = copySample(a, i, loom::plan::I64,
                        reinterpret_cast<uint8_t *>(out.data()), limit);
  if (!s.isOk())
    return s;
  return out;
}

TEST(SampleArrayTest, EveryTypeConvertsAsTorchDoes) {
  SampleArray u8 =
      mapped("u8", "|u1", "(2, 2)", rawBytes<uint8_t>({0, 255, 7, 8}));
  EXPECT_EQ(asF32(u8, 0), std::vector<float>({0, 255}));
  EXPECT_EQ(*asI64(u8, 1), std::vector<int64_t>({7, 8}));
  SampleArray u16 =
      mapped("u16", "<u2", "(1, 2)", rawBytes<uint16_t>({65535, 3}));
  EXPECT_EQ(*asI64(u16, 0), std::vector<int64_t>({65535, 3}));
  SampleArray u32 =
      mapped("u32", "<u4", "(1, 1)", rawBytes<uint32_t>({4000000000u}));
  EXPECT_EQ(*asI64(u32, 0), std::vector<int64_t>({4000000000ll}));
  SampleArray i8 = mapped("i8", "|i1", "(1, 2)", rawBytes<int8_t>({-128, 5}));
  EXPECT_EQ(asF32(i8, 0), std::vector<float>({-128, 5}));
  SampleArray i16 = mapped("i16", "<i2", "(1, 1)", rawBytes<int16_t>({-300}));
  EXPECT_EQ(*asI64(i16, 0), std::vector<int64_t>({-300}));
  // int64 to float32 rounds to nearest: 2^24 + 1 is not a float.
  SampleArray i64 =
      mapped("i64", "<i8", "(1, 2)", rawBytes<int64_t>({16777217, -3}));
  EXPECT_EQ(asF32(i64, 0), std::vector<float>({16777216, -3}));
  // Halves: 1, -2.5, the smallest subnormal 2^-24, the largest 65504, inf.
  SampleArray f16 =
      mapped("f16", "<f2", "(1, 5)",
             rawBytes<uint16_t>({0x3c00, 0xc100, 0x0001, 0x7bff, 0x7c00}));
  std::vector<float> halves = asF32(f16, 0);
  EXPECT_EQ(halves[0], 1.0f);
  EXPECT_EQ(halves[1], -2.5f);
  EXPECT_EQ(halves[2], std::ldexp(1.0f, -24));
  EXPECT_EQ(halves[3], 65504.0f);
  EXPECT_TRUE(std::isinf(halves[4]));
  SampleArray f64 =
      mapped("f64", "<f8", "(2, 1)", rawBytes<double>({0.1, 3.0}));
  EXPECT_EQ(asF32(f64, 0), std::vector<float>({0.1f}));
  // Whole floats feed an integer buffer.
  EXPECT_EQ(*asI64(f64, 1), std::vector<int64_t>({3}));
  // A sample is read in place: its bytes are the file's.
  SampleArray f32 =
      mapped("f32", "<f4", "(2, 2)", rawBytes<float>({1, 2, 3, 4}));
  EXPECT_EQ(asF32(f32, 1), std::vector<float>({3, 4}));
  EXPECT_NE(f32.mapped, nullptr);
}

TEST(SampleArrayTest, RefusesWhatWouldWrapOrTruncate) {
  SampleArray f32 = mapped("half", "<f4", "(1, 2)", rawBytes<float>({2, 0.5}));
  StatusOr<std::vector<int64_t>> half = asI64(f32, 0);
  ASSERT_FALSE(half.isOk());
  EXPECT_NE(
      half.status().message().find(
          "0.5 at sample 0, element 1 is not a whole number that fits int64"),
      std::string::npos)
      << half.status().message();
  SampleArray nan = mapped("nan", "<f4", "(1, 1)", rawBytes<float>({NAN}));
  EXPECT_FALSE(asI64(nan, 0).isOk());
  SampleArray big = mapped("u64", "<u8", "(1, 2)",
                           rawBytes<uint64_t>({1, 9223372036854775808ull}));
  StatusOr<std::vector<int64_t>> wrapped = asI64(big, 0);
  ASSERT_FALSE(wrapped.isOk());
  EXPECT_NE(wrapped.status().message().find(
                "9223372036854775808 at sample 0, element 1"),
            std::string::npos)
      << wrapped.status().message();
  SampleArray ids = mapped("ids", "<i4", "(3,)", rawBytes<int32_t>({0, 9, 10}));
  EXPECT_TRUE(asI64(ids, 1, 10).isOk());
  StatusOr<std::vector<int64_t>> outside = asI64(ids, 2, 10);
  ASSERT_FALSE(outside.isOk());
  EXPECT_NE(
      outside.status().message().find("class id 10 at sample 2, element 0 is "
                                      "outside [0, 10)"),
      std::string::npos)
      << outside.status().message();
}

TEST(SampleArrayTest, MapRefusesBadFiles) {
  auto refused = [](const std::string &name, const std::string &bytes,
                    const std::string &want) {
    std::string path = tempPath(name);
    writeRaw(path, bytes);
    StatusOr<SampleArray> a = mapNpy(path);
    ASSERT_FALSE(a.isOk()) << name;
    EXPECT_NE(a.status().message().find(want), std::string::npos)
        << a.status().message();
  };
  refused("be",
          npyImage("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
                   rawBytes<float>({1})),
          "unsupported dtype '>f4'");
  refused("short",
          npyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
                   rawBytes<float>({1, 2})),
          "truncated data (8 bytes for shape [4] float32, expected 16)");
  refused("magic", "not an npy file", "not a .npy file");
  StatusOr<SampleArray> dir = mapNpy(::testing::TempDir());
  ASSERT_FALSE(dir.isOk());
  EXPECT_NE(dir.status().message().find("is not a regular file"),
            std::string::npos);
}

TEST(SampleOrderTest, SequentialReadsTheFileInOrder) {
  SampleOrder order = SampleOrder::sequential();
  EXPECT_EQ(order.sample(0, 6), 0);
  EXPECT_EQ(order.sample(14, 6), 2);
  EXPECT_FALSE(order.isShuffled());
}

TEST(SampleOrderTest, ShuffledReadsEverySampleOncePerEpoch) {
  SampleOrder order = SampleOrder::shuffled(7);
  for (int64_t n : {1, 2, 3, 5, 16, 17, 1000, 4097}) {
    for (int64_t epoch : {0, 1, 5}) {
      std::set<int64_t> seen;
      for (int64_t i = 0; i < n; ++i) {
        int64_t s = order.sample(epoch * n + i, n);
        ASSERT_GE(s, 0);
        ASSERT_LT(s, n);
        seen.insert(s);
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), n)
          << n << " epoch " << epoch;
    }
  }
  // Each epoch, and each seed, has its own order; a seed always the same.
  auto firstTen = [](const SampleOrder &o, int64_t epoch) {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < 10; ++i)
      out.push_back(o.sample(epoch * 1000 + i, 1000));
    return out;
  };
  EXPECT_NE(firstTen(order, 0), firstTen(order, 1));
  EXPECT_NE(firstTen(order, 0), firstTen(SampleOrder::shuffled(8), 0));
  EXPECT_EQ(firstTen(order, 3), firstTen(SampleOrder::shuffled(7), 3));
  // The order is part of what a run (and its checkpoint) means: pinned.
  EXPECT_EQ(
      firstTen(order, 0),
      std::vector<int64_t>({169, 708, 234, 147, 438, 716, 344, 411, 330, 579}));
}

TEST(SampleOrderTest, ShuffledAtScaleNeedsNoTable) {
  // Ten billion windows, the size of a large corpus: any place maps at once.
  SampleOrder order = SampleOrder::shuffled(1);
  int64_t n = 10000000000ll;
  for (int64_t p : {int64_t{0}, n - 1, n, 3 * n + 12345})
    EXPECT_LT(order.sample(p, n), n);
  EXPECT_NE(order.sample(0, n), order.sample(1, n));
}

TEST(TokenStreamTest, WindowsGiveInputsAndShiftedTargets) {
  std::vector<uint16_t> tokens(21);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<uint16_t>(i);
  std::string path = tempPath("tokens.bin");
  writeRaw(path, rawBytes(tokens));
  StatusOr<TokenStream> s = openTokenStream(path, DataType::U16, 4);
  ASSERT_TRUE(s.isOk()) << s.status().message();
  EXPECT_EQ(s->tokens, 21);
  EXPECT_EQ(s->inputs.shape, std::vector<int64_t>({5, 4}));
  EXPECT_EQ(*asI64(s->inputs, 2), std::vector<int64_t>({8, 9, 10, 11}));
  EXPECT_EQ(*asI64(s->targets, 2), std::vector<int64_t>({9, 10, 11, 12}));
  EXPECT_EQ(*asI64(s->targets, 4), std::vector<int64_t>({17, 18, 19, 20}));
  // An id outside the vocabulary is named by its place in the file.
  std::vector<int64_t> out(4);
  Status outside =
      copySample(s->targets, 2, loom::plan::I64,
                 reinterpret_cast<uint8_t *>(out.data()), 11, "token");
  ASSERT_FALSE(outside.isOk());
  EXPECT_NE(
      outside.message().find("token 11 at position 11 is outside [0, 11), the "
                             "model's vocabulary"),
      std::string::npos)
      << outside.message();

  // uint32 tokens, and a 1-D .npy of tokens.
  std::vector<uint32_t> wide = {70000, 1, 2, 3};
  writeRaw(path, rawBytes(wide));
  StatusOr<TokenStream> w = openTokenStream(path, DataType::U32, 3);
  ASSERT_TRUE(w.isOk());
  EXPECT_EQ(*asI64(w->inputs, 0), std::vector<int64_t>({70000, 1, 2}));
  std::string npy = tempPath("tokens.npy");
  writeRaw(npy,
           npyImage("{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }",
                    rawBytes<int32_t>({5, 6, 7, 8, 9})));
  StatusOr<TokenStream> n = openTokenStream(npy, DataType::U16, 2);
  ASSERT_TRUE(n.isOk()) << n.status().message();
  EXPECT_EQ(*asI64(n->targets, 1), std::vector<int64_t>({8, 9}));
}

TEST(TokenStreamTest, RefusesFilesThatHoldNoWindow) {
  auto refused = [](const std::string &bytes, DataType type, int64_t seq,
                    const std::string &want) {
    std::string path = tempPath("bad_tokens");
    writeRaw(path, bytes);
    StatusOr<TokenStream> s = openTokenStream(path, type, seq);
    ASSERT_FALSE(s.isOk()) << want;
    EXPECT_NE(s.status().message().find(want), std::string::npos)
        << s.status().message();
  };
  refused(rawBytes<uint16_t>({1, 2, 3, 4}), DataType::U16, 4,
          "holds 4 token(s), fewer than one sample's 5");
  refused(std::string(7, '\0'), DataType::U16, 2,
          "7 bytes is not a whole number of uint16 tokens");
  refused(
      npyImage("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }",
               std::string(48, '\0')),
      DataType::U16, 2, "a token .npy holds a 1-D array, not shape [2, 3]");
  refused(npyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (9,), }",
                   std::string(36, '\0')),
          DataType::U16, 2, "tokens are integers, not float32");
}

} // namespace
