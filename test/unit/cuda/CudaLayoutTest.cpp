//===- CudaLayoutTest.cpp - Layout, gather and reduce ops vs the CPU -*- C++
//-*-===//
//
// transpose (tiled, coalesced and general paths), expand, slice /
// slice_grad, concat, gather / gather_grad (repeated indices, determinism),
// select, convert, reduce_*, batch_matmul. Sizes are odd on purpose (not
// multiples of the 32-wide tiles). All skip without a CUDA device.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

namespace loom::runtime::test {
namespace {

class CudaLayout : public ::testing::Test {
protected:
  void SetUp() override { LOOM_REQUIRE_CUDA(); }
  std::mt19937 rng{4321};
  HostTensor rand(const std::vector<int64_t> &shape, float lo = -1,
                  float hi = 1) {
    return f32(shape, randomFloats(numElements(shape), rng, lo, hi));
  }
  HostTensor indices(const std::vector<int64_t> &shape, int64_t lo,
                     int64_t hi) {
    std::uniform_int_distribution<int64_t> dist(lo, hi);
    std::vector<int64_t> v(numElements(shape));
    for (int64_t &x : v)
      x = dist(rng);
    return i64(shape, v);
  }
};

std::function<void(plan::Instruction &)> perm(std::vector<int64_t> p) {
  return [p](plan::Instruction &i) { setInts(i, "permutation", p); };
}

// Copies are exact: every comparison here has zero tolerance.
TEST_F(CudaLayout, TransposeEveryPath) {
  // Tiled: the innermost dim moves ([1, 0], batched last-two swap, and an
  // outer dim with its own stride).
  expectSameOnCuda("transpose", {rand({33, 65})}, {{65, 33}}, perm({1, 0}), {},
                   1, 0, 0);
  expectSameOnCuda("transpose", {rand({2, 3, 45, 70})}, {{2, 3, 70, 45}},
                   perm({0, 1, 3, 2}), {}, 1, 0, 0);
  expectSameOnCuda("transpose", {rand({4, 6, 8})}, {{6, 8, 4}}, perm({1, 2, 0}),
                   {}, 1, 0, 0);
  // Coalesced: the head transpose [B, S, H, D] -> [B, H, S, D].
  expectSameOnCuda("transpose", {rand({2, 37, 3, 16})}, {{2, 3, 37, 16}},
                   perm({0, 2, 1, 3}), {}, 1, 0, 0);
  // General gather and size-1 dims.
  expectSameOnCuda("transpose", {rand({3, 4, 5})}, {{5, 3, 4}}, perm({2, 0, 1}),
                   {}, 1, 0, 0);
  expectSameOnCuda("transpose", {rand({5, 1, 7})}, {{7, 1, 5}}, perm({2, 1, 0}),
                   {}, 1, 0, 0);
  expectSameOnCuda("transpose", {rand({1, 9})}, {{9, 1}}, perm({1, 0}), {}, 1,
                   0, 0);
}

TEST_F(CudaLayout, ExpandAndBroadcastLike) {
  expectSameOnCuda(
      "expand", {rand({3, 1, 5})}, {{2, 3, 4, 5}},
      [](plan::Instruction &i) {
        setInts(i, "shape", {2, -1, 4, -1});
      },
      {}, 1, 0, 0);
  expectSameOnCuda(
      "expand", {rand({1})}, {{7, 3}},
      [](plan::Instruction &i) {
        setInts(i, "shape", {7, 3});
      },
      {}, 1, 0, 0);
  expectSameOnCuda("broadcast_like", {rand({6, 1})}, {{6, 11}}, {}, {}, 1, 0,
                   0);
}

TEST_F(CudaLayout, SliceAndSliceGrad) {
  auto attrs = [](plan::Instruction &i) {
    setInts(i, "axes", {0, 2});
    setInts(i, "starts", {1, -5});
    setInts(i, "ends", {9, 100});
    setInts(i, "steps", {3, 2});
  };
  // Axis 0: rows 1, 4, 7; axis 2: start clamped to 0, columns 0, 2, 4.
  expectSameOnCuda("slice", {rand({10, 7, 6})}, {{3, 7, 3}}, attrs, {}, 1, 0,
                   0);
  expectSameOnCuda("slice_grad", {rand({3, 7, 3})}, {{10, 7, 6}}, attrs, {}, 1,
                   0, 0);
  // A contiguous slice of the last dim (GPT-2 splits q, k, v this way).
  auto qkv = [](plan::Instruction &i) {
    setInts(i, "axes", {2});
    setInts(i, "starts", {48});
    setInts(i, "ends", {96});
    setInts(i, "steps", {1});
  };
  expectSameOnCuda("slice", {rand({2, 5, 144})}, {{2, 5, 48}}, qkv, {}, 1, 0,
                   0);
  expectSameOnCuda("slice_grad", {rand({2, 5, 48})}, {{2, 5, 144}}, qkv, {}, 1,
                   0, 0);
}

TEST_F(CudaLayout, Concat) {
  for (int64_t axis : {0, 1, 2}) {
    std::vector<int64_t> a{2, 3, 4}, b{2, 3, 4}, c{2, 3, 4}, y{2, 3, 4};
    a[axis] = 2;
    b[axis] = 5;
    c[axis] = 1;
    y[axis] = 8;
    expectSameOnCuda(
        "concat", {rand(a), rand(b), rand(c)}, {y},
        [&](plan::Instruction &i) { setI(i, "axis", axis); }, {}, 1, 0, 0);
  }
}

TEST_F(CudaLayout, GatherEmbeddingAndInnerAxis) {
  // Embedding: [vocab, hidden] rows picked by [batch, seq] ids, with
  // negative ids counting from the end.
  HostTensor ids = indices({3, 7}, -50, 49);
  expectSameOnCuda(
      "gather", {rand({50, 24}), ids}, {{3, 7, 24}},
      [](plan::Instruction &i) { setI(i, "axis", 0); }, {}, 1, 0, 0);
  expectSameOnCuda(
      "gather", {rand({4, 10, 3}), indices({5}, 0, 9)}, {{4, 5, 3}},
      [](plan::Instruction &i) { setI(i, "axis", 1); }, {}, 1, 0, 0);
}

TEST_F(CudaLayout, GatherElementsAndItsGrad) {
  // Along the middle axis, more positions than rows: repeated and negative
  // indices, the gradient summed per column in the CPU kernel's order.
  auto axis1 = [](plan::Instruction &i) { setI(i, "axis", 1); };
  HostTensor ids = indices({4, 9, 6}, -5, 4);
  expectSameOnCuda("gather_elements", {rand({4, 5, 6}), ids}, {{4, 9, 6}},
                   axis1, {}, 1, 0, 0);
  expectSameOnCuda("gather_elements_grad", {rand({4, 9, 6}), ids},
                   {{4, 5, 6}}, axis1, {}, 1, 0, 0);
}

TEST_F(CudaLayout, ScatterNdAndGatherNd) {
  // Rows of k = 1 into [6, 5, 4] (repeated rows), and k = 2 reads.
  HostTensor rows = indices({8, 1}, -6, 5);
  for (const char *mode : {"none", "add", "mul"})
    expectSameOnCuda(
        "scatter_nd", {rand({6, 5, 4}), rows, rand({8, 5, 4})}, {{6, 5, 4}},
        [mode](plan::Instruction &i) {
          (*i.mutable_attrs())["reduction"].set_s(mode);
        },
        {}, 1, 0, 0);
  HostTensor pairs = indices({7, 2}, -5, 4);
  expectSameOnCuda("gather_nd", {rand({6, 5, 4}), pairs}, {{7, 4}},
                   [](plan::Instruction &) {}, {}, 1, 0, 0);
}

TEST_F(CudaLayout, GatherGradRepeatedIndicesIsDeterministic) {
  auto axis0 = [](plan::Instruction &i) { setI(i, "axis", 0); };
  // Few rows, many repeats (including negative spellings of the same row).
  HostTensor ids = indices({3, 7}, -10, 9);
  expectSameOnCuda("gather_grad", {rand({3, 7, 24}), ids}, {{10, 24}}, axis0,
                   {}, 1, 1e-6, 1e-6);
  // A token-embedding-sized case: 4096 ids into 1000 rows of 64.
  HostTensor many = indices({4096}, 0, 999);
  HostTensor dy = rand({4096, 64});
  expectSameOnCuda("gather_grad", {dy, many}, {{1000, 64}}, axis0, {}, 1, 1e-5,
                   1e-5);
  // Bitwise the same on a second run (sums follow the index positions).
  auto first =
      runOpOn(testDevice(), "gather_grad", {dy, many}, {{1000, 64}}, axis0);
  auto second =
      runOpOn(testDevice(), "gather_grad", {dy, many}, {{1000, 64}}, axis0);
  ASSERT_TRUE(first.isOk() && second.isOk());
  EXPECT_EQ((*first)[0].bytes, (*second)[0].bytes);
  // Axis 1.
  expectSameOnCuda(
      "gather_grad", {rand({4, 6, 3}), indices({6}, 0, 4)}, {{4, 5, 3}},
      [](plan::Instruction &i) { setI(i, "axis", 1); }, {}, 1, 1e-6, 1e-6);
}

TEST_F(CudaLayout, GatherBadIndexFailsTheStep) {
  for (const char *op : {"gather", "gather_grad"}) {
    bool grad = std::string(op) == "gather_grad";
    HostTensor in = grad ? rand({4, 3}) : rand({5, 3});
    std::vector<int64_t> out =
        grad ? std::vector<int64_t>{5, 3} : std::vector<int64_t>{4, 3};
    auto r = runOpOn(testDevice(), op, {in, i64({4}, {0, 1, 7, 2})}, {out},
                     [](plan::Instruction &i) { setI(i, "axis", 0); });
    ASSERT_FALSE(r.isOk()) << op;
    EXPECT_NE(r.status().message().find(
                  "index 7 out of range [0, 5) at position 2 of the indices"),
              std::string::npos)
        << r.status().message();
  }
}

TEST_F(CudaLayout, SelectAndConvert) {
  std::vector<float> cond(4);
  for (size_t i = 0; i < cond.size(); ++i)
    cond[i] = i % 2 ? 1.0f : 0.0f;
  expectSameOnCuda("select", {f32({4, 1}, cond), rand({4, 5}), rand({5})},
                   {{4, 5}}, {}, {}, 1, 0, 0);
  expectSameOnCuda("convert", {indices({3, 11}, -1000, 1000)}, {{3, 11}}, {},
                   {}, 1, 0, 0);
}

TEST_F(CudaLayout, Reductions) {
  HostTensor x = rand({4, 37, 6});
  for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max"})
    for (std::vector<int64_t> axes : std::vector<std::vector<int64_t>>{
             {0}, {1}, {2}, {0, 2}, {0, 1, 2}, {}})
      for (int keep = 0; keep < 2; ++keep) {
        std::vector<int64_t> y;
        for (int64_t d = 0; d < 3; ++d) {
          bool r = std::find(axes.begin(), axes.end(), d) != axes.end();
          if (!r)
            y.push_back(x.shape[d]);
          else if (keep)
            y.push_back(1);
        }
        expectSameOnCuda(
            op, {x}, {y},
            [&](plan::Instruction &i) {
              setInts(i, "axes", axes);
              if (keep)
                setI(i, "keep_dims", 1);
            },
            {}, 1, 1e-5, 1e-5);
      }
  // One long sum (one block per output) and NaN through reduce_max.
  expectSameOnCuda(
      "reduce_sum", {rand({3, 5000})}, {{3}},
      [](plan::Instruction &i) { setInts(i, "axes", {1}); }, {}, 1, 1e-4, 1e-4);
  std::vector<float> v = randomFloats(3 * 5000, rng);
  v[4321] = NAN;
  expectSameOnCuda("reduce_max", {f32({3, 5000}, v)}, {{3}},
                   [](plan::Instruction &i) { setInts(i, "axes", {1}); });
}

TEST_F(CudaLayout, BatchMatmulBatchesAndBroadcasts) {
  auto flags = [](int ta, int tb) {
    return [=](plan::Instruction &i) {
      if (ta)
        setI(i, "transpose_lhs", 1);
      if (tb)
        setI(i, "transpose_rhs", 1);
    };
  };
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      // Both batched (strided batch).
      HostTensor a = ta ? rand({2, 3, 7, 5}) : rand({2, 3, 5, 7});
      HostTensor b = tb ? rand({2, 3, 4, 7}) : rand({2, 3, 7, 4});
      expectSameOnCuda("batch_matmul", {a, b}, {{2, 3, 5, 4}}, flags(ta, tb));
      // Shared rhs (one tall GEMM without transpose_lhs) and shared lhs
      // (stride 0).
      HostTensor b2 = tb ? rand({4, 7}) : rand({7, 4});
      expectSameOnCuda("batch_matmul", {a, b2}, {{2, 3, 5, 4}}, flags(ta, tb));
      HostTensor a2 = ta ? rand({7, 5}) : rand({5, 7});
      expectSameOnCuda("batch_matmul", {a2, b}, {{2, 3, 5, 4}}, flags(ta, tb));
    }
  // Batches that broadcast against each other: one GEMM per entry.
  expectSameOnCuda("batch_matmul", {rand({2, 1, 5, 7}), rand({1, 3, 7, 4})},
                   {{2, 3, 5, 4}});
}

// The chunked copy: head transposes with D a multiple of 4 (16-byte
// chunks), D odd (elements); slices whose window starts misaligned; their
// gradients; a merged (contiguous) copy.
TEST_F(CudaLayout, ChunkCopyPaths) {
  for (int64_t d : {64, 8, 6, 5, 1}) {
    expectSameOnCuda("transpose", {rand({2, 9, 3, d})}, {{2, 3, 9, d}},
                     perm({0, 2, 1, 3}), {}, 1, 0, 0);
    expectSameOnCuda("transpose", {rand({2, 3, 9, d})}, {{2, 9, 3, d}},
                     perm({0, 2, 1, 3}), {}, 1, 0, 0);
  }
  expectSameOnCuda("transpose", {rand({4, 5, 6})}, {{4, 5, 6}}, perm({0, 1, 2}),
                   {}, 1, 0, 0);
  for (int64_t start : {0, 3, 16, 4}) {
    auto window = [start](plan::Instruction &i) {
      setInts(i, "axes", {2});
      setInts(i, "starts", {start});
      setInts(i, "ends", {start + 48});
      setInts(i, "steps", {1});
    };
    expectSameOnCuda("slice", {rand({2, 5, 144})}, {{2, 5, 48}}, window, {}, 1,
                     0, 0);
    expectSameOnCuda("slice_grad", {rand({2, 5, 48})}, {{2, 5, 144}}, window,
                     {}, 1, 0, 0);
  }
}

} // namespace
} // namespace loom::runtime::test
