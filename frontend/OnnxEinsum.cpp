//===- OnnxEinsum.cpp - Einsum as sums, transposes and products -*- C++ -*-===//
//
// ONNX `Einsum` of one or two operands becomes the loom ops a hand-written
// contraction would use, so it needs no kernel of its own and its gradient
// is theirs:
// - a label only one operand has and the output lacks is summed away first
//   (`loom.reduce_sum`);
// - two operands are laid out as `[batch, kept, contracted]` and
//   `[batch, contracted, kept]` (`loom.transpose`, `loom.reshape`) and
//   multiplied (`loom.batch_matmul`, or `loom.matmul` without batch labels);
// - the result is reshaped and transposed to the output's label order.
// `...` stands for the same leading dimensions in every operand. A label
// repeated within one operand (`ii`, a diagonal) is first reduced to one
// dimension: the two are moved last, flattened to `n*n` and sliced with step
// `n+1`. More than two operands, and labels whose sizes differ (within or
// between operands), are refused.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxGraphImporter.h"

#include "ir/LoomOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cctype>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::onnx_import;

namespace {

/// One operand: its labels (one character each; `...` expanded to private
/// labels) and its value.
struct Term {
  std::string labels;
  Value value;
};

/// Splits `equation` into its input terms and output, expanding `...` to the
/// labels '0', '1', ... for `ellipsisRank` dimensions; an empty output (no
/// `->`) is the labels used once, in alphabetical order, after the ellipsis.
LogicalResult parseEquation(GraphImporter &g, StringRef equation,
                            ArrayRef<int64_t> ranks,
                            SmallVectorImpl<std::string> &inputs,
                            std::string &output) {
  std::string eq;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c)))
      eq += c;
  size_t arrow = eq.find("->");
  StringRef lhs = StringRef(eq).take_front(arrow);
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != ranks.size())
    return g.error(llvm::formatv("Einsum equation '{0}' names {1} operands "
                                 "but the node has {2}",
                                 equation, terms.size(), ranks.size()));
  int64_t ellipsisRank = -1;
  auto expand = [&](StringRef term, int64_t rank,
                    std::string &out) -> LogicalResult {
    size_t dots = term.find("...");
    int64_t named = static_cast<int64_t>(term.size()) -
                    (dots == StringRef::npos ? 0 : 3);
    if (dots == StringRef::npos) {
      out = term.str();
    } else {
      int64_t e = rank - named;
      if (e < 0 || (ellipsisRank >= 0 && e != ellipsisRank))
        return g.error("unsupported Einsum equation '" + equation + "'",
                       "'...' must stand for the same dimensions in every "
                       "operand");
      ellipsisRank = e;
      out = term.take_front(dots).str();
      for (int64_t i = 0; i < e; ++i)
        out += static_cast<char>('0' + i);
      out += term.drop_front(dots + 3).str();
    }
    for (char c : out)
      if (!std::isalnum(static_cast<unsigned char>(c)))
        return g.error("Einsum equation '" + equation + "' has the label '" +
                       std::string(1, c) + "'");
    if (static_cast<int64_t>(out.size()) != rank)
      return g.error(llvm::formatv("Einsum term '{0}' has {1} labels for an "
                                   "operand of rank {2}",
                                   term, out.size(), rank));
    return success();
  };
  for (auto [term, rank] : llvm::zip(terms, ranks)) {
    inputs.emplace_back();
    if (failed(expand(term, rank, inputs.back())))
      return failure();
  }
  if (arrow != std::string::npos) {
    StringRef rhs = StringRef(eq).drop_front(arrow + 2);
    size_t dots = rhs.find("...");
    output = dots == StringRef::npos ? rhs.str() : rhs.take_front(dots).str();
    if (dots != StringRef::npos) {
      for (int64_t i = 0; i < std::max<int64_t>(ellipsisRank, 0); ++i)
        output += static_cast<char>('0' + i);
      output += rhs.drop_front(dots + 3).str();
    }
    return success();
  }
  // Implicit output: the ellipsis, then labels that appear once, sorted.
  for (int64_t i = 0; i < std::max<int64_t>(ellipsisRank, 0); ++i)
    output += static_cast<char>('0' + i);
  std::string once;
  for (const std::string &in : inputs)
    for (char c : in) {
      if (std::isdigit(static_cast<unsigned char>(c)))
        continue;
      int count = 0;
      for (const std::string &other : inputs)
        count += llvm::count(other, c);
      if (count == 1)
        once += c;
    }
  llvm::sort(once);
  output += once;
  return success();
}

/// `t` with the labels no other term (and not `keep`) has summed away.
Value sumPrivateLabels(GraphImporter &g, Term &t, StringRef others,
                       StringRef keep) {
  SmallVector<int64_t> axes;
  std::string kept;
  for (auto [i, c] : llvm::enumerate(t.labels)) {
    if (!others.contains(c) && !keep.contains(c))
      axes.push_back(i);
    else
      kept += c;
  }
  if (axes.empty())
    return t.value;
  OpBuilder &b = g.builder();
  t.value = ReduceSumOp::create(b, g.loc(), t.value,
                                b.getDenseI64ArrayAttr(axes), UnitAttr());
  t.labels = kept;
  return t.value;
}

/// `t` with each label it repeats (`ii`) reduced to its diagonal: the two
/// dimensions moved last, flattened and sliced with step `n+1`.
LogicalResult takeDiagonals(GraphImporter &g, Term &t, StringRef equation) {
  OpBuilder &b = g.builder();
  for (size_t i = 0; i < t.labels.size(); ++i) {
    size_t j = t.labels.find(t.labels[i], i + 1);
    if (j == std::string::npos)
      continue;
    ArrayRef<int64_t> shape = shapeOf(t.value);
    int64_t n = shape[i];
    if (shape[j] != n)
      return g.error(llvm::formatv("Einsum label '{0}' has sizes {1} and {2} "
                                   "in '{3}'",
                                   t.labels[i], n, shape[j], equation),
                     "a diagonal needs a square pair of dimensions");
    std::string order;
    for (auto [k, c] : llvm::enumerate(t.labels))
      if (k != i && k != j)
        order += c;
    SmallVector<int64_t> perm, flat;
    for (size_t k = 0; k < t.labels.size(); ++k)
      if (k != i && k != j) {
        perm.push_back(k);
        flat.push_back(shape[k]);
      }
    perm.append({static_cast<int64_t>(i), static_cast<int64_t>(j)});
    Value v = t.value;
    if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
      v = TransposeOp::create(b, g.loc(), v, b.getDenseI64ArrayAttr(perm));
    flat.push_back(n * n);
    auto reshaped = reshapeTo(g, v, flat);
    if (failed(reshaped))
      return failure();
    int64_t last = static_cast<int64_t>(flat.size()) - 1;
    t.value = SliceOp::create(
        b, g.loc(), *reshaped, b.getDenseI64ArrayAttr({last}),
        b.getDenseI64ArrayAttr({0}), b.getDenseI64ArrayAttr({n * n}),
        b.getDenseI64ArrayAttr({n + 1}));
    t.labels = order + t.labels[i];
    i = static_cast<size_t>(-1); // the labels moved: look again from the start
  }
  return success();
}

/// `t` transposed to the label order `order` (a permutation of its labels).
Value permuteTo(GraphImporter &g, Term &t, StringRef order) {
  SmallVector<int64_t> perm;
  for (char c : order)
    perm.push_back(t.labels.find(c));
  t.labels = order.str();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return t.value;
  OpBuilder &b = g.builder();
  t.value = TransposeOp::create(b, g.loc(), t.value,
                                b.getDenseI64ArrayAttr(perm));
  return t.value;
}

} // namespace

LogicalResult onnx_import::convertEinsum(GraphImporter &g) {
  const onnx::AttributeProto *eqAttr = g.attr("equation");
  if (!eqAttr)
    return g.error("Einsum needs the attribute equation");
  int n = g.node().input_size();
  if (n < 1 || n > 2)
    return g.error(llvm::formatv("unsupported Einsum of {0} operands", n),
                   "one or two operands are supported");
  SmallVector<Term> terms;
  SmallVector<int64_t> ranks;
  for (int i = 0; i < n; ++i) {
    auto v = g.data(i);
    if (failed(v))
      return failure();
    terms.push_back({"", *v});
    ranks.push_back(shapeOf(*v).size());
  }
  SmallVector<std::string> labels;
  std::string out;
  StringRef equation = eqAttr->s();
  if (failed(parseEquation(g, equation, ranks, labels, out)))
    return failure();
  // Each label's size, the same wherever it appears.
  llvm::DenseMap<char, int64_t> size;
  for (auto [t, l] : llvm::zip(terms, labels)) {
    t.labels = l;
    if (failed(takeDiagonals(g, t, equation)))
      return failure();
    for (auto [i, c] : llvm::enumerate(t.labels)) {
      int64_t d = shapeOf(t.value)[i];
      auto [it, fresh] = size.try_emplace(c, d);
      if (!fresh && it->second != d)
        return g.error(llvm::formatv("Einsum label '{0}' has sizes {1} and "
                                     "{2} in '{3}'",
                                     c, it->second, d, equation),
                       "broadcasting a label is not supported");
    }
  }
  for (char c : out)
    if (!size.count(c))
      return g.error("Einsum output label '" + std::string(1, c) +
                     "' is in no operand of '" + equation + "'");

  OpBuilder &b = g.builder();
  Term result;
  if (n == 1) {
    result = terms[0];
    sumPrivateLabels(g, result, "", out);
  } else {
    Term &a = terms[0], &c = terms[1];
    sumPrivateLabels(g, a, c.labels, out);
    sumPrivateLabels(g, c, a.labels, out);
    std::string batch, left, right, contracted;
    for (char l : a.labels) {
      bool inC = c.labels.find(l) != std::string::npos;
      bool inOut = out.find(l) != std::string::npos;
      (inC ? (inOut ? batch : contracted) : left) += l;
    }
    for (char l : c.labels)
      if (a.labels.find(l) == std::string::npos)
        right += l;
    auto product = [&](StringRef ls) {
      int64_t p = 1;
      for (char l : ls)
        p *= size[l];
      return p;
    };
    permuteTo(g, a, batch + left + contracted);
    permuteTo(g, c, batch + contracted + right);
    int64_t B = product(batch), M = product(left), K = product(contracted),
            N = product(right);
    SmallVector<int64_t> aShape = {M, K}, cShape = {K, N};
    if (!batch.empty()) {
      aShape.insert(aShape.begin(), B);
      cShape.insert(cShape.begin(), B);
    }
    auto a2 = reshapeTo(g, a.value, aShape);
    auto c2 = reshapeTo(g, c.value, cShape);
    if (failed(a2) || failed(c2))
      return failure();
    Value prod =
        batch.empty()
            ? MatmulOp::create(b, g.loc(), *a2, *c2, UnitAttr(), UnitAttr())
                  .getResult()
            : BatchMatmulOp::create(b, g.loc(), *a2, *c2, UnitAttr(),
                                    UnitAttr())
                  .getResult();
    result.labels = batch + left + right;
    SmallVector<int64_t> shape;
    for (char l : result.labels)
      shape.push_back(size[l]);
    auto reshaped = reshapeTo(g, prod, shape);
    if (failed(reshaped))
      return failure();
    result.value = *reshaped;
  }
  return g.define(0, permuteTo(g, result, out));
}
