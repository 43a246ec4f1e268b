#include "quant/gptq.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "quant/fp8_rows.hpp"
#include "quant/int8_groups.hpp"
#include "quant/int8_rows.hpp"

namespace infer::quant {
namespace {

// In place: a (n x n row major, lower triangle read) becomes its lower Cholesky factor L (a = L Lᵀ),
// zeros above. False when a is not positive definite.
bool cholesky_lower(std::vector<double>& a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double* rj = a.data() + j * n;
    double s = rj[j];
    for (int64_t k = 0; k < j; ++k) s -= rj[k] * rj[k];
    if (!(s > 0.0) || !std::isfinite(s)) return false;
    const double l = std::sqrt(s);
    rj[j] = l;
    for (int64_t i = j + 1; i < n; ++i) {
      double* ri = a.data() + i * n;
      double t = ri[j];
      for (int64_t k = 0; k < j; ++k) t -= ri[k] * rj[k];
      ri[j] = t / l;
    }
    for (int64_t k = j + 1; k < n; ++k) rj[k] = 0.0;
  }
  return true;
}

// M = L⁻¹ for a lower triangular L, row by row: M[i] = (e_i - Σ_{k<i} L[i][k] M[k]) / L[i][i].
std::vector<double> lower_inverse(const std::vector<double>& l, int64_t n) {
  std::vector<double> m(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double* mi = m.data() + i * n;
    const double* li = l.data() + i * n;
    mi[i] = 1.0;
    for (int64_t k = 0; k < i; ++k) {
      const double c = li[k];
      const double* mk = m.data() + k * n;
      for (int64_t j = 0; j <= k; ++j) mi[j] -= c * mk[j];
    }
    for (int64_t j = 0; j <= i; ++j) mi[j] /= li[i];
  }
  return m;
}

}  // namespace

Result<std::vector<double>> gptq_factor(const std::vector<double>& h, int64_t n, std::vector<bool>& dead) {
  if (n <= 0 || h.size() != static_cast<size_t>(n * n))
    return invalid_argument("GPTQ: H has " + std::to_string(h.size()) + " entries, not " + std::to_string(n) + " squared");
  dead.assign(static_cast<size_t>(n), false);
  double mean = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const double d = h[static_cast<size_t>(j * n + j)];
    dead[static_cast<size_t>(j)] = !(d > 0.0);
    mean += dead[static_cast<size_t>(j)] ? 1.0 : d;
  }
  mean /= static_cast<double>(n);
  // With the order reversed (J H J, J the reversal), the lower Cholesky factor L' gives
  // U = J L'⁻¹ J: upper triangular, and Uᵀ U = J (L' L'ᵀ)⁻¹ J = H⁻¹.
  for (double damp = 0.01; damp <= 1.0; damp *= 10.0) {
    std::vector<double> a(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) {  // H's lower triangle, placed at (J H J)'s
        double v = dead[static_cast<size_t>(i)] || dead[static_cast<size_t>(j)] ? 0.0 : h[static_cast<size_t>(i * n + j)];
        if (i == j) v = (dead[static_cast<size_t>(i)] ? 1.0 : v) + damp * mean;
        a[static_cast<size_t>((n - 1 - j) * n + (n - 1 - i))] = v;
      }
    if (!cholesky_lower(a, n)) continue;
    const std::vector<double> m = lower_inverse(a, n);
    std::vector<double> u(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j < n; ++j) u[static_cast<size_t>(i * n + j)] = m[static_cast<size_t>((n - 1 - i) * n + (n - 1 - j))];
    return u;
  }
  return invalid_argument("GPTQ: the input's second moments are not positive definite, even damped by its mean diagonal");
}

namespace {

// The loop of every GPTQ row: x (double, dead columns zero) quantized column by column, in
// `order` (null: 0 .. n - 1), quantize(j) giving column j's dequantized value (reading x as it
// stands), each column's error spread over the columns after it through U's row.
template <class Quantize>
void compensate_row(std::vector<double>& x, int64_t n, const std::vector<double>& u, const int64_t* order,
                    Quantize&& quantize) {
  const auto col = [order](int64_t t) { return static_cast<size_t>(order ? order[t] : t); };
  for (int64_t t = 0; t < n; ++t) {
    const double deq = quantize(static_cast<int64_t>(col(t)));
    const double* ut = u.data() + t * n;
    const double e = (x[col(t)] - deq) / ut[t];
    for (int64_t k = t + 1; k < n; ++k) x[col(k)] -= e * ut[k];
  }
}

std::vector<double> live_values(const float* w, int64_t n, const std::vector<bool>& dead) {
  std::vector<double> x(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(j)] = dead[static_cast<size_t>(j)] ? 0.0 : w[j];
  return x;
}

}  // namespace

void gptq_quantize_row(const float* w, int64_t n, const std::vector<double>& u, const std::vector<bool>& dead,
                       const I4QuantOptions& o, void* dst) noexcept {
  const int64_t g = o.group;
  std::vector<double> x = live_values(w, n, dead);
  std::vector<float> current(static_cast<size_t>(g));  // the group's values as each was quantized
  I4Group grp;
  compensate_row(x, n, u, nullptr, [&](int64_t j) {
    const int64_t at = j % g;
    if (at == 0) {
      for (int64_t k = 0; k < g; ++k) current[static_cast<size_t>(k)] = static_cast<float>(x[static_cast<size_t>(j + k)]);
      grp = i4_choose_group(current.data(), o.importance ? o.importance + j : nullptr, g, o.symmetric, o.scale_precision);
    }
    const auto v = static_cast<float>(x[static_cast<size_t>(j)]);
    current[static_cast<size_t>(at)] = v;
    if (at == g - 1) i4_store_block(dst, g, j / g, grp, current.data());
    return static_cast<double>(grp.d) * (static_cast<double>(i4_code(v, grp)) - static_cast<double>(grp.z));
  });
}

std::vector<int64_t> gptq_act_order(const std::vector<double>& h, int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) order[static_cast<size_t>(j)] = j;
  const auto diag = [&](int64_t j) {
    const double d = h[static_cast<size_t>(j * n + j)];
    return d > 0.0 ? d : 0.0;  // dead (or NaN) last
  };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return diag(a) > diag(b); });
  return order;
}

Result<std::vector<double>> gptq_factor(const std::vector<double>& h, int64_t n, std::vector<bool>& dead,
                                        const std::vector<int64_t>& order) {
  if (n <= 0 || h.size() != static_cast<size_t>(n * n) || order.size() != static_cast<size_t>(n))
    return invalid_argument("GPTQ: H or the column order does not have " + std::to_string(n) + " columns");
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int64_t j : order) {
    if (j < 0 || j >= n || seen[static_cast<size_t>(j)]) return invalid_argument("GPTQ: the column order is not a permutation");
    seen[static_cast<size_t>(j)] = true;
  }
  std::vector<double> hp(static_cast<size_t>(n * n));
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < n; ++b) {
      const int64_t i = std::max(order[static_cast<size_t>(a)], order[static_cast<size_t>(b)]);
      const int64_t j = std::min(order[static_cast<size_t>(a)], order[static_cast<size_t>(b)]);
      hp[static_cast<size_t>(a * n + b)] = h[static_cast<size_t>(i * n + j)];  // H's lower triangle
    }
  std::vector<bool> dead_p;
  auto u = gptq_factor(hp, n, dead_p);
  if (!u.ok()) return u;
  dead.assign(static_cast<size_t>(n), false);
  for (int64_t t = 0; t < n; ++t) dead[static_cast<size_t>(order[static_cast<size_t>(t)])] = dead_p[static_cast<size_t>(t)];
  return u;
}

void gptq_quantize_row_ordered(const float* w, int64_t n, const std::vector<double>& u, const std::vector<bool>& dead,
                               const std::vector<int64_t>& order, const I4QuantOptions& o, void* dst) noexcept {
  const int64_t g = o.group;
  std::vector<double> x = live_values(w, n, dead);
  std::vector<float> v(static_cast<size_t>(n));  // each column's value as it was quantized
  for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(j)] = static_cast<float>(x[static_cast<size_t>(j)]);
  std::vector<I4Group> groups(static_cast<size_t>(n / g));  // static: from the values as they come in
  for (int64_t b = 0; b < n / g; ++b)
    groups[static_cast<size_t>(b)] =
        i4_choose_group(v.data() + b * g, o.importance ? o.importance + b * g : nullptr, g, o.symmetric, o.scale_precision);
  compensate_row(x, n, u, order.data(), [&](int64_t j) {
    const auto vj = static_cast<float>(x[static_cast<size_t>(j)]);
    v[static_cast<size_t>(j)] = vj;
    const I4Group& grp = groups[static_cast<size_t>(j / g)];
    return static_cast<double>(grp.d) * (static_cast<double>(i4_code(vj, grp)) - static_cast<double>(grp.z));
  });
  for (int64_t b = 0; b < n / g; ++b) i4_store_block(dst, g, b, groups[static_cast<size_t>(b)], v.data() + b * g);
}

void gptq_quantize_row_i8(const float* w, int64_t n, const std::vector<double>& u, const std::vector<bool>& dead,
                          void* dst) noexcept {
  std::vector<double> x = live_values(w, n, dead);
  float amax = 0.0f;
  for (int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(static_cast<float>(x[static_cast<size_t>(j)])));
  const float s = amax / 127.0f;
  auto* q = static_cast<int8_t*>(dst);
  int32_t sum = 0;
  compensate_row(x, n, u, nullptr, [&](int64_t j) {
    const auto v = static_cast<float>(x[static_cast<size_t>(j)]);
    const float c = s != 0.0f ? std::clamp(std::nearbyint(v / s), -127.0f, 127.0f) : 0.0f;
    q[j] = static_cast<int8_t>(c);
    sum += q[j];
    return static_cast<double>(s) * c;
  });
  i8_row_store_trailer(dst, n, s, sum);
}

void gptq_quantize_row_i8_groups(const float* w, int64_t n, const std::vector<double>& u, const std::vector<bool>& dead,
                                 int64_t group, ScalePrecision p, void* dst) noexcept {
  std::vector<double> x = live_values(w, n, dead);
  std::vector<float> current(static_cast<size_t>(group));  // the group's values as they stand at its first column
  auto* out = static_cast<uint8_t*>(dst);
  float d = 0.0f;
  compensate_row(x, n, u, nullptr, [&](int64_t j) {
    uint8_t* blk = out + (j / group) * i8_block_bytes(group);
    if (j % group == 0) {
      for (int64_t k = 0; k < group; ++k) current[static_cast<size_t>(k)] = static_cast<float>(x[static_cast<size_t>(j + k)]);
      d = i8_group_scale(current.data(), group, p);
      std::memcpy(blk, &d, 4);
    }
    const int8_t q = i8_code(static_cast<float>(x[static_cast<size_t>(j)]), d);
    blk[4 + j % group] = static_cast<uint8_t>(q);
    return static_cast<double>(d) * q;
  });
}

void gptq_quantize_row_f8(const float* w, int64_t n, const std::vector<double>& u, const std::vector<bool>& dead,
                          float tensor_scale, void* dst) noexcept {
  std::vector<double> x = live_values(w, n, dead);
  float s = tensor_scale;
  if (s == 0.0f) {
    float amax = 0.0f;
    for (int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(static_cast<float>(x[static_cast<size_t>(j)])));
    s = amax / 448.0f;
  }
  auto* q = static_cast<uint8_t*>(dst);
  compensate_row(x, n, u, nullptr, [&](int64_t j) {
    q[j] = s != 0.0f ? f32_to_e4m3(static_cast<float>(x[static_cast<size_t>(j)]) / s) : 0;
    return static_cast<double>(s) * e4m3_to_f32(q[j]);
  });
  f8_row_store_trailer(dst, n, s);
}

}  // namespace infer::quant
