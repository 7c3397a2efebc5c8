//===- ModelSpec.cpp - A transformer described by its shape ------*- C++ -*-===//

#include "passes/planner/ModelSpec.h"
#include "passes/planner/PlanChoice.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir::loom::planner;
using llvm::StringRef;

int64_t GptSpec::layerNormParameters() const {
  // GPT: two layer norms with scale and bias; LLaMA: two RMS norm scales.
  return arch == Arch::Gpt ? 4 * hidden : 2 * hidden;
}

int64_t GptSpec::layerParameters() const {
  int64_t h = hidden, kv = kvWidth();
  int64_t attention = h * (h + 2 * kv) + h * h; // q, k, v and the projection
  int64_t mlp = (arch == Arch::Gpt ? 2 : 3) * h * ffn; // fc, proj (+ gate)
  int64_t biases = arch == Arch::Gpt ? (h + 2 * kv) + h + ffn + h : 0;
  return attention + mlp + biases + layerNormParameters();
}

int64_t GptSpec::embeddingParameters() const {
  int64_t finalNorm = arch == Arch::Gpt ? 2 * hidden : hidden;
  int64_t positions = arch == Arch::Gpt ? seq * hidden : 0;
  return vocab * hidden + positions + finalNorm;
}

int64_t GptSpec::headParameters() const {
  return arch == Arch::Gpt ? 0 : vocab * hidden; // GPT ties it
}

double GptSpec::forwardFlopsPerSequence() const {
  double h = static_cast<double>(hidden), s = static_cast<double>(seq);
  double kv = static_cast<double>(kvWidth()), f = static_cast<double>(ffn);
  double products = h * (h + 2 * kv) + h * h + (arch == Arch::Gpt ? 2 : 3) * h * f;
  double perToken = 2 * products + 4 * s * h; // QK^T and PV over s keys
  return s * (layers * perToken + 2 * h * static_cast<double>(vocab));
}

double GptSpec::keptElementsPerToken(StringRef remat) const {
  double h = static_cast<double>(hidden), kv = static_cast<double>(kvWidth());
  double f = static_cast<double>(ffn);
  if (remat == "full")
    return h;
  // Norm 1's input and output, q, k, v, the attention's output, norm 2's
  // input and output; the MLP: GELU's input and output (GPT), or the gate's
  // and up projection's outputs and their product (LLaMA). Attention keeps
  // one float of softmax statistics per head, not its scores.
  double attention = 4 * h + 2 * kv + 2 * static_cast<double>(heads);
  double mlp = arch == Arch::Gpt ? 2 * h + 2 * f : 2 * h + 3 * f;
  double none = attention + mlp;
  if (remat == "selective")
    return none - 2 * h - f; // the norms' outputs and the activation's
  return none;
}

static llvm::Error specError(StringRef text, const llvm::Twine &why) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "bad --model-spec '" + text + "': " + why +
          "; expected gpt:l=LAYERS,h=HIDDEN,a=HEADS,s=SEQ,v=VOCAB[,ffn=N,"
          "kv_heads=N,arch=gpt|llama] (docs/loomc.md)");
}

llvm::Expected<GptSpec> mlir::loom::planner::parseModelSpec(StringRef text) {
  GptSpec spec;
  spec.text = text.str();
  auto [family, rest] = text.split(':');
  if (family != "gpt" || !text.contains(':'))
    return specError(text, "unknown family '" + family + "'");
  llvm::SmallVector<StringRef> items;
  rest.split(items, ',', -1, false);
  for (StringRef item : items) {
    auto [key, value] = item.split('=');
    if (key == "arch") {
      if (value == "gpt")
        spec.arch = Arch::Gpt;
      else if (value == "llama")
        spec.arch = Arch::Llama;
      else
        return specError(text, "arch must be gpt or llama, got '" + value + "'");
      continue;
    }
    int64_t *field = llvm::StringSwitch<int64_t *>(key)
                         .Case("l", &spec.layers)
                         .Case("h", &spec.hidden)
                         .Case("a", &spec.heads)
                         .Case("s", &spec.seq)
                         .Case("v", &spec.vocab)
                         .Case("ffn", &spec.ffn)
                         .Case("kv_heads", &spec.kvHeads)
                         .Default(nullptr);
    if (!field)
      return specError(text, "unknown key '" + key + "'");
    int64_t v;
    // Up to 2^24 a dimension keeps every product below 2^63.
    if (value.getAsInteger(10, v) || v < 1 || v > (int64_t(1) << 24))
      return specError(text, "'" + item +
                                 "' is not a whole number from 1 to 16777216");
    *field = v;
  }
  for (auto [name, v] : {std::pair<const char *, int64_t>{"l", spec.layers},
                         {"h", spec.hidden},
                         {"a", spec.heads},
                         {"s", spec.seq},
                         {"v", spec.vocab}})
    if (v == 0)
      return specError(text, llvm::Twine("missing '") + name + "='");
  if (spec.hidden % spec.heads != 0)
    return specError(text, "h=" + llvm::Twine(spec.hidden) +
                               " is not a multiple of a=" +
                               llvm::Twine(spec.heads));
  if (spec.kvHeads == 0)
    spec.kvHeads = spec.heads;
  if (spec.heads % spec.kvHeads != 0)
    return specError(text, "a=" + llvm::Twine(spec.heads) +
                               " is not a multiple of kv_heads=" +
                               llvm::Twine(spec.kvHeads));
  if (spec.ffn == 0)
    spec.ffn = spec.arch == Arch::Gpt
                   ? 4 * spec.hidden
                   : (8 * spec.hidden / 3 + 255) / 256 * 256;
  return spec;
}

ModelCost mlir::loom::planner::modelCostOf(const GptSpec &spec,
                                           Precision precision) {
  double act = precision == Precision::Bf16 ? 2 : 4;
  double s = double(spec.seq), h = double(spec.hidden);
  double kv = double(spec.kvWidth()), f = double(spec.ffn);
  double V = double(spec.vocab);
  bool gpt = spec.arch == Arch::Gpt;
  // The [s, h] residual stream of one sequence.
  double stream = s * h * act;

  ModelCost model;
  model.name = spec.text;
  model.family = gpt ? "gpt" : "llama";

  PartCost layer;
  layer.products = {{s, h + 2 * kv, h, TpSplit::Columns}, // q, k, v
                    {s, h, h, TpSplit::Inner}, // the attention's projection
                    {s, (gpt ? 1 : 2) * f, h, TpSplit::Columns}, // fc (+gate)
                    {s, h, f, TpSplit::Inner}}; // the MLP's projection
  // Causal attention over s keys: the kernels skip the masked half.
  layer.attentionFlops = 2 * s * s * h;
  // Memory-bound ops read and write each element once: the two norms (2h
  // each), two residual adds (3h each), the MLP's activation (GELU 2f,
  // SwiGLU 3f); the backward moves twice as much. Selective recomputation
  // runs the norms and the activation again.
  double normBytes = 4 * h * s * act;
  double activationBytes = (gpt ? 2 : 3) * f * s * act;
  layer.forwardBytes = normBytes + 6 * h * s * act + activationBytes;
  layer.backwardBytes = 2 * layer.forwardBytes;
  layer.selectiveBytes = (4 * h + (gpt ? 2 : 3) * f) * s * act;
  layer.wholeParameters = double(spec.layerNormParameters());
  layer.splitParameters =
      double(spec.layerParameters()) - layer.wholeParameters;
  layer.largestWeight = h * f; // the MLP's
  // Two all-reduces of the layer's activations forward and two backward
  // (all-gather + reduce-scatter under sequence parallelism, the same bytes
  // on the wire); full recomputation runs the forward's again, selective
  // gathers the split norms' outputs again.
  layer.tpCollectives = {
      {CollectiveKind::AllReduce, stream, TpPhase::Forward, 2},
      {CollectiveKind::AllReduce, stream, TpPhase::Backward, 2},
      {CollectiveKind::AllReduce, stream, TpPhase::FullRecompute, 2},
      {CollectiveKind::AllGather, stream, TpPhase::SelectiveRecompute, 2}};
  // Under tp the norms' inputs and outputs (4h a token, 2h when selective
  // recomputation remakes the outputs) stay whole without sequence
  // parallelism; full recomputation keeps the layer's input whole, or with
  // sequence parallelism its input and the attention's reduce-scattered
  // output, split.
  auto kept = [&](Remat remat) {
    return spec.keptElementsPerToken(stringifyRemat(remat)) * s * act;
  };
  layer.kept[size_t(Remat::None)] = {kept(Remat::None), 4 * h * s * act,
                                     kept(Remat::None)};
  layer.kept[size_t(Remat::Selective)] = {
      kept(Remat::Selective), 2 * h * s * act, kept(Remat::Selective)};
  layer.kept[size_t(Remat::Full)] = {stream, stream, 2 * stream};
  layer.boundaryBytes = stream;
  layer.kind = 0;
  for (int64_t i = 0; i < spec.layers; ++i) {
    model.layers.push_back(layer);
    model.layers.back().name = "layer." + std::to_string(i);
  }

  // The embedding: the lookup and its gradient's scatter into the (split)
  // table, the exchange of its output, which stays for the backward.
  PartCost &first = model.first;
  first.name = "embedding";
  first.wholeBytes = 3 * stream;
  first.fixedBytes = V * h * 4;
  first.tpCollectives = {
      {CollectiveKind::AllReduce, stream, TpPhase::Forward, 2}};
  first.splitParameters = double(spec.embeddingParameters());
  first.kept.fill({stream, stream, stream});
  first.boundaryBytes = stream;

  // The head and the loss: softmax cross-entropy over the local vocabulary
  // reads and writes the f32 logits four times and all-reduces their row
  // maxima and sums; the head's input gradient is all-reduced.
  PartCost &last = model.last;
  last.name = "head";
  last.products = {{s, V, h, TpSplit::Columns}};
  last.forwardBytes = 4 * s * V * 4;
  last.tpCollectives = {
      {CollectiveKind::AllReduce, s * 4, TpPhase::Forward, 2},
      {CollectiveKind::AllReduce, stream, TpPhase::Backward, 2}};
  last.splitParameters = double(spec.headParameters());
  last.transientBytes = s * V * 4; // one micro-batch's f32 logits

  model.tiedParameters = gpt ? V * h : 0; // GPT's head is the embedding
  model.tpDivides = {spec.heads, spec.kvHeads, spec.ffn};
  model.maxTp = spec.heads;
  model.modelFlopsPerSample = 3 * spec.forwardFlopsPerSequence();
  model.parameters = spec.parameters();
  return model;
}
