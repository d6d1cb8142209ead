// Position-keyed sampling (see torch_sampling.h).
#include "torch_sampling.h"

#include <cmath>

namespace la {

at::Tensor sample_tokens(const at::Tensor& logits, const std::vector<int32_t>& positions, const SampleParams& sp) {
  const int64_t T = logits.size(0), Vn = logits.size(1);
  at::Tensor l = logits / sp.temperature;
  if (sp.top_k > 0 && sp.top_k < Vn) {
    at::Tensor kth = std::get<0>(at::topk(l, sp.top_k, -1, true, true)).narrow(1, sp.top_k - 1, 1);
    l = l.masked_fill(l < kth, -INFINITY);
  }
  at::Tensor probs = at::softmax(l.to(at::kDouble), -1);
  auto [sorted, order] = probs.sort(/*stable=*/true, -1, /*descending=*/true);
  if (sp.top_p < 1.f) {
    at::Tensor cum = sorted.cumsum(-1);
    at::Tensor drop = (cum - sorted) >= static_cast<double>(sp.top_p);
    sorted = sorted.masked_fill(drop, 0.0);
  }
  at::Tensor cdf = sorted.cumsum(-1);
  std::vector<double> u(T);
  for (int64_t i = 0; i < T; ++i) u[i] = position_uniform(sp.seed, sp.stream, positions[i] + 1);
  at::Tensor tu = at::from_blob(u.data(), {T, 1}, at::TensorOptions().dtype(at::kDouble)).to(logits.device());
  tu = tu * cdf.narrow(1, Vn - 1, 1);
  at::Tensor choice = (cdf <= tu).sum(-1, true).clamp_max(Vn - 1);
  return order.gather(1, choice).view({T});
}

}  // namespace la
