#include "hessians.hpp"

#include <string_view>

#include "core/tensor.hpp"
#include "kernels/cpu/matmul.hpp"

namespace infer::tools {

std::string hessian_key(const std::string& weight) {
  if (weight.rfind("blk.", 0) != 0) return "";
  const size_t dot = weight.find('.', 4);
  if (dot == std::string::npos) return "";
  const std::string layer = weight.substr(0, dot + 1);  // "blk.N."
  const std::string_view what = std::string_view(weight).substr(dot + 1);
  if (what == "attn_q.weight" || what == "attn_k.weight" || what == "attn_v.weight") return layer + "attn_q.weight";
  if (what == "attn_qkv.weight" || what == "attn_output.weight" || what == "ffn_gate.weight" || what == "ffn_up.weight" ||
      what == "ffn_down.weight")
    return weight;
  return "";
}

Status HessianCollector::add(const MatmulInput& in) {
  const std::string key = hessian_key(std::string(in.weight));
  if (key.empty() || key != in.weight) return Status::ok();  // k and v: q's input
  const int64_t n = in.cols, t = in.rows;
  Hessian& h = hessians_[key];
  if (h.n == 0) {
    h.n = n;
    h.sum.assign(static_cast<size_t>(n * n), 0.0);
  }
  if (h.n != n)
    return invalid_argument(key + ": inputs of " + std::to_string(n) + " and " + std::to_string(h.n) + " columns");
  // Xᵀ (n rows of t), then Xᵀ (Xᵀ)ᵀ = XᵀX by the F32 matmul: row i of the result is Xᵀ's row i
  // against every row of Xᵀ as a weight matrix.
  xt_.resize(static_cast<size_t>(n * t));
  for (int64_t r = 0; r < t; ++r)
    for (int64_t c = 0; c < n; ++c) xt_[static_cast<size_t>(c * t + r)] = in.data[r * in.row_stride + c];
  xtx_.resize(static_cast<size_t>(n * n));
  const TensorView w = TensorView::contiguous(DType::f32, 2, {t, n, 1, 1}, xt_.data());
  matmul(w, xt_.data(), n, t, xtx_.data(), n, *pool_);
  for (size_t k = 0; k < xtx_.size(); ++k) h.sum[k] += xtx_[k];
  h.rows += t;
  return Status::ok();
}

}  // namespace infer::tools
