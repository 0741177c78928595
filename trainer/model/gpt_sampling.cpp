// Sampling text from the GPT (see gpt_sampling.hpp).
#include "model/gpt_sampling.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace ouro::trainer {

int sampleTokenTopK(const float* logits, int n, double temperature, int top_k, double coin) {
  if (logits == nullptr || n < 1) {
    throw std::invalid_argument("GPT sampling: needs at least one logit, got " + std::to_string(n));
  }
  if (!(coin >= 0.0 && coin < 1.0)) {
    throw std::invalid_argument("GPT sampling: coin " + std::to_string(coin) + " is outside [0, 1)");
  }
  int argmax = 0;
  for (int i = 1; i < n; ++i) {
    if (logits[i] > logits[argmax]) argmax = i;
  }
  if (!(temperature > 0.0)) return argmax;
  std::vector<double> scaled(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) scaled[size_t(i)] = double(logits[i]) / temperature;
  if (top_k > 0 && top_k < n) {
    std::vector<double> sorted = scaled;
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<double>());
    const double kth = sorted[size_t(top_k - 1)];
    for (double& v : scaled) {
      if (v < kth) v = -std::numeric_limits<double>::infinity();
    }
  }
  const double max = scaled[size_t(argmax)];  // the argmax is always kept
  double sum = 0;
  for (double& v : scaled) {
    v = std::exp(v - max);  // exp(-inf) = 0: a dropped token
    sum += v;
  }
  double cdf = 0;
  int last_kept = argmax;
  for (int i = 0; i < n; ++i) {
    if (scaled[size_t(i)] == 0.0) continue;
    last_kept = i;
    cdf += scaled[size_t(i)] / sum;
    if (coin < cdf) return i;
  }
  return last_kept;  // rounding left the cumulative sum just below 1
}

int sampleToken(const float* logits, int n, float temperature, float coin) {
  return sampleTokenTopK(logits, n, double(temperature), 0, double(coin));
}

std::string generateText(Gpt& gpt, const float* params, const std::string& prompt, int count, double temperature,
                         int top_k, uint64_t seed) {
  const GptConfig& c = gpt.layout().config();
  if (c.vocab_size != kGptByteVocab) {
    throw std::invalid_argument("GPT sampling: text needs a byte-level model (vocab_size " +
                                std::to_string(kGptByteVocab) + "), this one has vocab_size " +
                                std::to_string(c.vocab_size));
  }
  if (count < 0) throw std::invalid_argument("GPT sampling: cannot generate " + std::to_string(count) + " bytes");
  if (params == nullptr) throw std::invalid_argument("GPT sampling: no parameters given");
  std::vector<int32_t> context;
  context.reserve(prompt.size() + size_t(count));
  for (char ch : prompt) context.push_back(int32_t(static_cast<unsigned char>(ch)));
  if (context.empty()) context.push_back('\n');
  std::mt19937_64 generator(seed);
  const size_t window = size_t(gpt.maxSeq());
  std::string out;
  out.reserve(size_t(count));
  for (int i = 0; i < count; ++i) {
    const size_t T = std::min(context.size(), window);
    gpt.forward(params, context.data() + (context.size() - T), nullptr, 1, int(T));
    const double coin = temperature > 0.0 ? double(generator() >> 11) * 0x1p-53 : 0.0;
    const int token = sampleTokenTopK(gpt.lastLogits(0), c.vocab_size, temperature, top_k, coin);
    context.push_back(token);
    out.push_back(static_cast<char>(static_cast<unsigned char>(token)));
  }
  return out;
}

}  // namespace ouro::trainer
