//===- NpyTest.cpp - .npy reading and writing -------------------------------===//

#include "runtime/data/Npy.h"
#include "NpyImage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <unistd.h>

using namespace loom::runtime;

using namespace loom::runtime::test;

TEST(NpyTest, RoundTripsEveryDType) {
  for (ElemType type :
       {ElemType::F32, ElemType::F64, ElemType::I32, ElemType::I64}) {
    HostTensor t(type, {2, 3});
    for (size_t i = 0; i < t.bytes.size(); ++i)
      t.bytes[i] = static_cast<uint8_t>(i * 7 + 1);
    std::string path = tempPath(std::string("rt_") + elemTypeName(type));
    ASSERT_TRUE(writeNpy(path, t).isOk());
    StatusOr<HostTensor> back = readNpy(path);
    ASSERT_TRUE(back.isOk()) << back.status().message();
    EXPECT_EQ(back->type, type);
    EXPECT_EQ(back->shape, t.shape);
    EXPECT_EQ(back->bytes, t.bytes);
  }
}

TEST(NpyTest, RoundTripsScalarsAndVectors) {
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{}, {5}, {1, 1, 4}, {0, 3}}) {
    HostTensor t(ElemType::F32, shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = 0.5f * i - 1;
    std::string path = tempPath("shape");
    ASSERT_TRUE(writeNpy(path, t).isOk());
    StatusOr<HostTensor> back = readNpy(path);
    ASSERT_TRUE(back.isOk()) << back.status().message();
    EXPECT_EQ(back->shape, shape);
    EXPECT_EQ(back->bytes, t.bytes);
  }
}

TEST(NpyTest, HeaderIsAlignedAndNumpyStyle) {
  HostTensor t = HostTensor::fromF32({3}, {1, 2, 3});
  std::string path = tempPath("hdr");
  ASSERT_TRUE(writeNpy(path, t).isOk());
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  ASSERT_EQ((bytes.size() - 12) % 64, 0u);
  EXPECT_NE(bytes.find("'shape': (3,)"), std::string::npos);
  EXPECT_NE(bytes.find("'descr': '<f4'"), std::string::npos);
}

TEST(NpyTest, ReadsVersion2HeadersAndConvertsF64) {
  double values[2] = {1.5, -2.25};
  std::string image = npyImage(
      "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
      std::string(reinterpret_cast<char *>(values), sizeof(values)), 2);
  StatusOr<HostTensor> raw = parseNpy(image, "v2");
  ASSERT_TRUE(raw.isOk()) << raw.status().message();
  EXPECT_EQ(raw->type, ElemType::F64);
  NpyReadOptions opts;
  opts.convertF64ToF32 = true;
  StatusOr<HostTensor> f = parseNpy(image, "v2", opts);
  ASSERT_TRUE(f.isOk());
  ASSERT_EQ(f->type, ElemType::F32);
  EXPECT_EQ(f->data<float>()[0], 1.5f);
  EXPECT_EQ(f->data<float>()[1], -2.25f);
}

TEST(NpyTest, MissingFile) {
  StatusOr<HostTensor> r = readNpy("/nonexistent/dir/x.npy");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("cannot open '/nonexistent/dir/x.npy'"),
            std::string::npos);
}

TEST(NpyTest, NotNpy) {
  std::string path = tempPath("text");
  writeRaw(path, "hello, this is not numpy data");
  StatusOr<HostTensor> r = readNpy(path);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("not a .npy file"), std::string::npos);
  EXPECT_NE(r.status().message().find(path), std::string::npos);
}

TEST(NpyTest, FortranOrder) {
  StatusOr<HostTensor> r = parseNpy(
      npyImage("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }",
               std::string(4, '\0')),
      "f.npy");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("Fortran-order"), std::string::npos);
}

TEST(NpyTest, UnsupportedDTypes) {
  for (const char *descr : {">f4", "|O", "<U3", "<c8"}) {
    StatusOr<HostTensor> r = parseNpy(
        npyImage(std::string("{'descr': '") + descr +
                     "', 'fortran_order': False, 'shape': (1,), }",
                 std::string(16, '\0')),
        "d.npy");
    ASSERT_FALSE(r.isOk()) << descr;
    EXPECT_NE(r.status().message().find("unsupported dtype"),
              std::string::npos);
    EXPECT_NE(r.status().message().find(descr), std::string::npos);
  }
}

TEST(NpyTest, TruncatedData) {
  StatusOr<HostTensor> r = parseNpy(
      npyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }",
               std::string(20, '\0')),
      "t.npy");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("truncated data"), std::string::npos);
}

TEST(NpyTest, TruncatedHeader) {
  std::string image =
      npyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
               std::string(4, '\0'));
  StatusOr<HostTensor> r = parseNpy(image.substr(0, 30), "h.npy");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("truncated .npy header"),
            std::string::npos);
}

TEST(NpyTest, BoolAndNarrowTypesRoundTrip) {
  // Bools, narrow integers and half floats read and write as themselves.
  std::string dir = ::testing::TempDir();
  HostTensor b(ElemType::Bool, {3});
  b.bytes = {1, 0, 1};
  HostTensor h(ElemType::F16, {2});
  uint16_t bits[2] = {floatToHalf(1.5f), floatToHalf(-0.25f)};
  std::memcpy(h.bytes.data(), bits, sizeof(bits));
  HostTensor u(ElemType::U8, {2});
  u.bytes = {7, 255};
  for (const HostTensor &t : {b, h, u}) {
    std::string path = dir + "/narrow_" + elemTypeName(t.type) + ".npy";
    ASSERT_TRUE(writeNpy(path, t).isOk());
    StatusOr<HostTensor> back = readNpy(path);
    ASSERT_TRUE(back.isOk()) << back.status().message();
    EXPECT_EQ(back->type, t.type);
    EXPECT_EQ(back->shape, t.shape);
    EXPECT_EQ(back->bytes, t.bytes);
  }
  EXPECT_EQ(h.toF32(), (std::vector<float>{1.5f, -0.25f}));
  EXPECT_EQ(u.toF32(), (std::vector<float>{7.0f, 255.0f}));
}

TEST(HostTensorTest, ConvertElementsAtTheBoundary) {
  HostTensor f = HostTensor::fromF32(
      {6}, {0.0f, -2.75f, 65519.0f, 65520.0f, 1.0f / 16777216.0f, NAN});
  // float16: nearest even, overflow to infinity, subnormals kept, NaN kept.
  std::vector<float> h = convertElements(f, ElemType::F16).toF32();
  EXPECT_EQ(h[0], 0.0f);
  EXPECT_EQ(h[1], -2.75f);
  EXPECT_EQ(h[2], 65504.0f);
  EXPECT_TRUE(std::isinf(h[3]));
  EXPECT_EQ(h[4], 1.0f / 16777216.0f);
  EXPECT_TRUE(std::isnan(h[5]));
  // Bools: nonzero is true (NaN included); integers truncate toward zero.
  HostTensor b = convertElements(f, ElemType::Bool);
  EXPECT_EQ(b.bytes, (std::vector<uint8_t>{0, 1, 1, 1, 1, 1}));
  HostTensor i = convertElements(f, ElemType::I8);
  EXPECT_EQ(static_cast<int8_t>(i.bytes[1]), -2);
  // Integers widen exactly; uint64 above 2^63 stays itself through int64.
  HostTensor u(ElemType::U64, {1});
  uint64_t big = (uint64_t(1) << 63) + 5;
  std::memcpy(u.bytes.data(), &big, sizeof(big));
  HostTensor back =
      convertElements(convertElements(u, ElemType::I64), ElemType::U64);
  EXPECT_EQ(back.bytes, u.bytes);
}
