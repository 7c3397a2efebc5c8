//===- NpyTest.cpp - .npy reading and writing -------------------------------===//

#include "runtime/data/Npy.h"
#include "NpyImage.h"

#include <gtest/gtest.h>

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
  for (const char *descr : {"<f2", ">f4", "|b1", "<U3"}) {
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

