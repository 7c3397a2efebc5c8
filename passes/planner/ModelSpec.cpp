//===- ModelSpec.cpp - A transformer described by its shape ------*- C++ -*-===//

#include "passes/planner/ModelSpec.h"

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
