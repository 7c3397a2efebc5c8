//===- KernelShapeTest.cpp - Layout and indexing kernels vs references ----===//

#include "KernelTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

using Shape = std::vector<int64_t>;

TEST(KernelShapeTest, TransposeRandomPermutations) {
  std::mt19937 rng(21);
  std::vector<Shape> shapes = {{3, 4}, {2, 3, 4}, {2, 1, 3, 5}, {3, 2, 4, 1, 5},
                               {1, 7}, {70, 90},  {4, 33, 65},  {2, 3, 64, 32}};
  for (const Shape &xs : shapes)
    for (int trial = 0; trial < 6; ++trial) {
      std::vector<int64_t> perm(xs.size());
      for (size_t i = 0; i < perm.size(); ++i)
        perm[i] = i;
      std::shuffle(perm.begin(), perm.end(), rng);
      Shape ys;
      for (int64_t p : perm)
        ys.push_back(xs[p]);
      auto x = randomFloats(numElements(xs), rng);
      bool ok;
      auto r = runF32(
          "transpose", {HostTensor::fromF32(xs, x)}, {ys},
          [&](plan::Instruction &i) { setInts(i, "permutation", perm); }, &ok);
      ASSERT_TRUE(ok);
      std::vector<double> want(x.size());
      for (int64_t i = 0; i < numElements(ys); ++i) {
        Shape yi = unravel(i, ys), xi(xs.size());
        for (size_t d = 0; d < perm.size(); ++d)
          xi[perm[d]] = yi[d];
        want[i] = x[ravel(xi, xs)];
      }
      EXPECT_TRUE(allClose(r[0], want, 0))
          << shapeToString(xs) << " perm " << shapeToString(perm);
    }
  auto bad = runOp("transpose", {HostTensor(ElemType::F32, {2, 3})}, {{3, 2}},
                   [](plan::Instruction &i) {
                     setInts(i, "permutation", {0, 0});
                   });
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("not a permutation"),
            std::string::npos);
}

TEST(KernelShapeTest, ExpandAndBroadcastLikeUseTheOutputShape) {
  std::mt19937 rng(22);
  std::vector<std::pair<Shape, Shape>> cases = {{{3, 1}, {3, 4}},
                                                {{1}, {2, 3}},
                                                {{4}, {2, 3, 4}},
                                                {{2, 1, 3}, {2, 5, 3}},
                                                {{}, {2, 2}},
                                                {{1, 3, 1}, {4, 3, 70}},
                                                {{64, 1, 300}, {64, 2, 300}}};
  for (const char *op : {"expand", "broadcast_like"})
    for (const auto &c : cases) {
      auto x = randomFloats(numElements(c.first), rng);
      bool ok;
      auto r = runF32(
          op, {HostTensor::fromF32(c.first, x)}, {c.second},
          [&](plan::Instruction &i) {
            if (std::string(op) == "expand") {
              Shape spec = c.second;
              spec.back() = -1; // "keep": the output decides
              setInts(i, "shape", spec);
            }
          },
          &ok);
      ASSERT_TRUE(ok);
      std::vector<double> want(numElements(c.second));
      for (size_t i = 0; i < want.size(); ++i)
        want[i] = bcastAt(x, c.first, unravel(i, c.second));
      EXPECT_TRUE(allClose(r[0], want, 0)) << op << shapeToString(c.first);
    }
  auto bad = runOp("expand", {HostTensor(ElemType::F32, {3})}, {{2, 4}});
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("does not broadcast"),
            std::string::npos);
}

struct SliceCase {
  Shape x;
  std::vector<int64_t> axes, starts, ends, steps;
};

TEST(KernelShapeTest, SliceAndSliceGrad) {
  std::mt19937 rng(23);
  const int64_t big = int64_t(1) << 62;
  std::vector<SliceCase> cases = {
      {{5, 7}, {1}, {2}, {6}, {1}},
      {{5, 7}, {0, 1}, {1, 0}, {5, 7}, {2, 3}},
      {{2, 9, 4}, {1}, {-3}, {big}, {2}}, // starts/ends clamp to [0, dim]
      {{2, 3, 10}, {2}, {3}, {3}, {1}},   // empty
      {{4, 6, 5}, {2, 0}, {1, 1}, {5, 4}, {3, 2}},
      {{3, 200, 130}, {2}, {0}, {128}, {1}},
      {{6}, {0}, {5}, {100}, {1}}};
  for (const SliceCase &c : cases) {
    Shape ys = c.x;
    std::vector<int64_t> start(c.x.size(), 0), step(c.x.size(), 1);
    for (size_t i = 0; i < c.axes.size(); ++i) {
      int64_t a = c.axes[i];
      int64_t s = std::clamp<int64_t>(c.starts[i], 0, c.x[a]);
      int64_t e = std::clamp<int64_t>(c.ends[i], 0, c.x[a]);
      ys[a] = e > s ? (e - s + c.steps[i] - 1) / c.steps[i] : 0;
      start[a] = s;
      step[a] = c.steps[i];
    }
    auto attrs = [&](plan::Instruction &i) {
      setInts(i, "axes", c.axes);
      setInts(i, "starts", c.starts);
      setInts(i, "ends", c.ends);
      setInts(i, "steps", c.steps);
    };
    auto source = [&](const Shape &yi) {
      Shape xi(yi.size());
      for (size_t d = 0; d < yi.size(); ++d)
        xi[d] = start[d] + yi[d] * step[d];
      return ravel(xi, c.x);
    };
    auto x = randomFloats(numElements(c.x), rng);
    bool ok;
    auto r = runF32("slice", {HostTensor::fromF32(c.x, x)}, {ys}, attrs, &ok);
    ASSERT_TRUE(ok) << shapeToString(c.x);
    std::vector<double> want(numElements(ys));
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = x[source(unravel(i, ys))];
    EXPECT_TRUE(allClose(r[0], want, 0)) << shapeToString(c.x);

    auto dy = randomFloats(numElements(ys), rng);
    auto g =
        runF32("slice_grad", {HostTensor::fromF32(ys, dy)}, {c.x}, attrs, &ok);
    ASSERT_TRUE(ok);
    std::vector<double> wantGrad(numElements(c.x), 0.0);
    for (size_t i = 0; i < dy.size(); ++i)
      wantGrad[source(unravel(i, ys))] = dy[i];
    EXPECT_TRUE(allClose(g[0], wantGrad, 0)) << shapeToString(c.x);
  }
  auto bad = runOp("slice", {HostTensor(ElemType::F32, {4})}, {{2}},
                   [](plan::Instruction &i) {
                     setInts(i, "axes", {0});
                     setInts(i, "starts", {0});
                     setInts(i, "ends", {4});
                     setInts(i, "steps", {0});
                   });
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("must be positive"), std::string::npos);
}

TEST(KernelShapeTest, ConcatAlongEveryAxis) {
  std::mt19937 rng(24);
  Shape base = {3, 4, 5};
  for (int64_t axis = 0; axis < 3; ++axis) {
    std::vector<Shape> parts = {base, base, base};
    parts[0][axis] = 1;
    parts[1][axis] = 2;
    parts[2][axis] = 4;
    Shape ys = base;
    ys[axis] = 7;
    std::vector<HostTensor> ins;
    std::vector<std::vector<float>> data;
    for (const Shape &s : parts) {
      data.push_back(randomFloats(numElements(s), rng));
      ins.push_back(HostTensor::fromF32(s, data.back()));
    }
    bool ok;
    auto r = runF32(
        "concat", ins, {ys},
        [&](plan::Instruction &i) { setI(i, "axis", axis); }, &ok);
    ASSERT_TRUE(ok);
    std::vector<double> want(numElements(ys));
    for (size_t i = 0; i < want.size(); ++i) {
      Shape yi = unravel(i, ys);
      int part = 0;
      while (yi[axis] >= parts[part][axis])
        yi[axis] -= parts[part++][axis];
      want[i] = data[part][ravel(yi, parts[part])];
    }
    EXPECT_TRUE(allClose(r[0], want, 0)) << "axis " << axis;
  }
  auto bad = runOp(
      "concat",
      {HostTensor(ElemType::F32, {2, 3}), HostTensor(ElemType::F32, {3, 3})},
      {{2, 6}}, [](plan::Instruction &i) { setI(i, "axis", 1); });
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("differs from input 0"),
            std::string::npos);
}

TEST(KernelShapeTest, GatherAndGatherGradAlongAxes) {
  std::mt19937 rng(25);
  Shape ds = {5, 4, 3};
  Shape is = {2, 3};
  std::vector<int64_t> idxByAxis[3] = {
      {0, 4, -1, 2, 4, 0}, {3, 3, -4, 1, 0, 2}, {2, -1, 0, 1, 1, 1}};
  for (int64_t axis = 0; axis < 3; ++axis) {
    const std::vector<int64_t> &idx = idxByAxis[axis];
    Shape ys(ds.begin(), ds.begin() + axis);
    ys.insert(ys.end(), is.begin(), is.end());
    ys.insert(ys.end(), ds.begin() + axis + 1, ds.end());
    auto data = randomFloats(numElements(ds), rng);
    auto attrs = [&](plan::Instruction &i) { setI(i, "axis", axis); };
    bool ok;
    auto r = runF32(
        "gather", {HostTensor::fromF32(ds, data), HostTensor::fromI64(is, idx)},
        {ys}, attrs, &ok);
    ASSERT_TRUE(ok);
    // y[pre, i, post] = data[pre, idx[i], post].
    auto dataIndex = [&](const Shape &yi) {
      Shape di(yi.begin(), yi.begin() + axis);
      int64_t flat = ravel(Shape(yi.begin() + axis, yi.begin() + axis + 2), is);
      int64_t v = idx[flat] < 0 ? idx[flat] + ds[axis] : idx[flat];
      di.push_back(v);
      di.insert(di.end(), yi.begin() + axis + 2, yi.end());
      return ravel(di, ds);
    };
    std::vector<double> want(numElements(ys));
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = data[dataIndex(unravel(i, ys))];
    EXPECT_TRUE(allClose(r[0], want, 0)) << "axis " << axis;

    auto dy = randomFloats(numElements(ys), rng);
    auto g = runF32("gather_grad",
                    {HostTensor::fromF32(ys, dy), HostTensor::fromI64(is, idx)},
                    {ds}, attrs, &ok);
    ASSERT_TRUE(ok);
    std::vector<double> wantGrad(numElements(ds), 0.0); // duplicates add up
    for (size_t i = 0; i < dy.size(); ++i)
      wantGrad[dataIndex(unravel(i, ys))] += dy[i];
    EXPECT_TRUE(allClose(g[0], wantGrad, 1e-6)) << "axis " << axis;
  }
}

TEST(KernelShapeTest, GatherElementsAndItsGradAlongAxes) {
  // y = data with the axis coordinate replaced by the index; the gradient
  // adds every position into the element it read (duplicates add up).
  std::mt19937 rng(27);
  Shape ds = {3, 4, 5};
  std::uniform_int_distribution<int64_t> pick(-3, 2);
  for (int64_t axis = 0; axis < 3; ++axis) {
    Shape is = ds;
    is[axis] = 6; // more positions than rows: repeated indices
    std::vector<int64_t> idx(numElements(is));
    for (int64_t &v : idx)
      v = pick(rng);
    auto data = randomFloats(numElements(ds), rng);
    auto attrs = [&](plan::Instruction &i) { setI(i, "axis", axis); };
    bool ok;
    auto r = runF32("gather_elements",
                    {HostTensor::fromF32(ds, data), HostTensor::fromI64(is, idx)},
                    {is}, attrs, &ok);
    ASSERT_TRUE(ok);
    auto source = [&](size_t t) {
      Shape c = unravel(t, is);
      c[axis] = idx[t] < 0 ? idx[t] + ds[axis] : idx[t];
      return ravel(c, ds);
    };
    std::vector<double> want(idx.size());
    for (size_t t = 0; t < idx.size(); ++t)
      want[t] = data[source(t)];
    EXPECT_TRUE(allClose(r[0], want, 0)) << "axis " << axis;
    auto dy = randomFloats(idx.size(), rng);
    auto g = runF32("gather_elements_grad",
                    {HostTensor::fromF32(is, dy), HostTensor::fromI64(is, idx)},
                    {ds}, attrs, &ok);
    ASSERT_TRUE(ok);
    std::vector<double> wantGrad(numElements(ds), 0.0);
    for (size_t t = 0; t < idx.size(); ++t)
      wantGrad[source(t)] += dy[t];
    EXPECT_TRUE(allClose(g[0], wantGrad, 1e-6)) << "axis " << axis;
  }
  // An index out of range fails the step; indices that do not match the
  // data outside the axis fail at bind.
  for (const char *op : {"gather_elements", "gather_elements_grad"}) {
    bool grad = std::string(op) == "gather_elements_grad";
    auto bad = runOp(op,
                     {HostTensor(ElemType::F32, grad ? Shape{2, 2} : Shape{2, 3}),
                      HostTensor::fromI64({2, 2}, {0, 1, 3, -1})},
                     {grad ? Shape{2, 3} : Shape{2, 2}},
                     [](plan::Instruction &i) { setI(i, "axis", 1); });
    ASSERT_FALSE(bad.isOk()) << op;
    EXPECT_NE(bad.status().message().find("index 3 out of range [0, 3)"),
              std::string::npos)
        << bad.status().message();
  }
  auto shape = runOp("gather_elements",
                     {HostTensor(ElemType::F32, {2, 3}),
                      HostTensor::fromI64({3, 1}, {0, 1, 2})},
                     {{3, 1}}, [](plan::Instruction &i) { setI(i, "axis", 1); });
  ASSERT_FALSE(shape.isOk());
  EXPECT_NE(shape.status().message().find(
                "indices [3, 1] do not index [2, 3] outside axis 1"),
            std::string::npos)
      << shape.status().message();
}

TEST(KernelShapeTest, ScatterNdAndGatherNd) {
  // data [3, 2, 2]; rows of k = 1 index name [2, 2] slices; row 2 repeats
  // row 0's slice (-3 is 0): none keeps the later, add and mul combine.
  std::vector<float> data(12), upd(12);
  for (int i = 0; i < 12; ++i) {
    data[i] = 1.0f + i;
    upd[i] = 0.5f * (i + 1);
  }
  std::vector<int64_t> idx = {0, 2, -3};
  auto reduce = [](const std::string &m) {
    return [m](plan::Instruction &i) {
      (*i.mutable_attrs())["reduction"].set_s(m);
    };
  };
  for (std::string mode : {"none", "add", "mul"}) {
    bool ok;
    auto r = runF32("scatter_nd",
                    {HostTensor::fromF32({3, 2, 2}, data),
                     HostTensor::fromI64({3, 1}, idx),
                     HostTensor::fromF32({3, 2, 2}, upd)},
                    {{3, 2, 2}}, reduce(mode), &ok);
    ASSERT_TRUE(ok) << mode;
    std::vector<double> want(data.begin(), data.end());
    for (int row = 0; row < 3; ++row) {
      int64_t at = (idx[row] + 3) % 3 * 4;
      for (int e = 0; e < 4; ++e) {
        double u = upd[row * 4 + e];
        double &w = want[at + e];
        w = mode == "none" ? u : mode == "add" ? w + u : w * u;
      }
    }
    EXPECT_TRUE(allClose(r[0], want, 1e-6)) << mode;
  }
  // gather_nd with k = 2: rows name [2] slices.
  bool ok;
  auto g = runF32("gather_nd",
                  {HostTensor::fromF32({3, 2, 2}, data),
                   HostTensor::fromI64({2, 2}, {2, 1, -1, 0})},
                  {{2, 2}}, {}, &ok);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(allClose(g[0], {11, 12, 9, 10}, 0));
  // A bad index fails the step before anything is written.
  auto bad = runOp("scatter_nd",
                   {HostTensor::fromF32({3, 2, 2}, data),
                    HostTensor::fromI64({1, 1}, {3}),
                    HostTensor::fromF32({1, 2, 2}, {1, 2, 3, 4})},
                   {{3, 2, 2}}, reduce("add"));
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("index 3 out of range [0, 3)"),
            std::string::npos)
      << bad.status().message();
  auto mode = runOp("scatter_nd",
                    {HostTensor::fromF32({3, 2, 2}, data),
                     HostTensor::fromI64({1, 1}, {0}),
                     HostTensor::fromF32({1, 2, 2}, {1, 2, 3, 4})},
                    {{3, 2, 2}}, reduce("max"));
  ASSERT_FALSE(mode.isOk());
  EXPECT_NE(mode.status().message().find("reduction 'max' is not one of"),
            std::string::npos)
      << mode.status().message();
}

TEST(KernelShapeTest, EmbeddingGatherGradLarge) {
  // Axis 0 with many rows and duplicate ids: the threaded column blocks.
  std::mt19937 rng(26);
  const int64_t vocab = 50, dim = 700, count = 64;
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::vector<int64_t> idx(count);
  for (int64_t &v : idx)
    v = id(rng);
  auto dy = randomFloats(count * dim, rng);
  bool ok;
  auto g = runF32(
      "gather_grad",
      {HostTensor::fromF32({count, dim}, dy),
       HostTensor::fromI64({count}, idx)},
      {{vocab, dim}}, [](plan::Instruction &i) { setI(i, "axis", 0); }, &ok);
  ASSERT_TRUE(ok);
  std::vector<double> want(vocab * dim, 0.0);
  for (int64_t i = 0; i < count; ++i)
    for (int64_t j = 0; j < dim; ++j)
      want[idx[i] * dim + j] += dy[i * dim + j];
  EXPECT_TRUE(allClose(g[0], want, 1e-5));
}

TEST(KernelShapeTest, GatherIndexOutOfRangeFailsTheStep) {
  for (const char *op : {"gather", "gather_grad"}) {
    bool grad = std::string(op) == "gather_grad";
    auto r = runOp(op,
                   {grad ? HostTensor(ElemType::F32, {3, 2})
                         : HostTensor(ElemType::F32, {512, 2}),
                    HostTensor::fromI64({3}, {1, 600, 2})},
                   {grad ? Shape{512, 2} : Shape{3, 2}},
                   [](plan::Instruction &i) { setI(i, "axis", 0); });
    ASSERT_FALSE(r.isOk()) << op;
    const std::string &m = r.status().message();
    EXPECT_NE(m.find("index 600 out of range [0, 512)"), std::string::npos)
        << m;
    EXPECT_NE(m.find("'" + std::string(op) + "' at 'test_op'"),
              std::string::npos)
        << m;
  }
  auto neg =
      runOp("gather",
            {HostTensor(ElemType::F32, {4}), HostTensor::fromI64({1}, {-5})},
            {{1}}, [](plan::Instruction &i) { setI(i, "axis", 0); });
  ASSERT_FALSE(neg.isOk());
  EXPECT_NE(neg.status().message().find("index -5 out of range [0, 4)"),
            std::string::npos);
}

TEST(KernelShapeTest, GatherChecksIndexDtype) {
  auto r =
      runOp("gather",
            {HostTensor(ElemType::F32, {4, 2}), HostTensor(ElemType::F32, {3})},
            {{3, 2}}, [](plan::Instruction &i) { setI(i, "axis", 0); });
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("indices are f32, expected i64"),
            std::string::npos)
      << r.status().message();
}

} // namespace
