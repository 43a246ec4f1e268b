#include "model/weights.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/status_macros.hpp"
#include "format/hf_directory.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/ops.hpp"
#include "quant/fp8_rows.hpp"
#include "quant/int4_groups.hpp"
#include "quant/int8_groups.hpp"
#include "quant/int8_rows.hpp"

namespace infer {

WeightBinder::WeightBinder(const ModelFile& file, std::optional<DType> weight_type, std::deque<ConvertedTensor>& store,
                           std::function<void(double)> progress)
    : file_(file), weight_type_(weight_type), store_(&store), progress_(std::move(progress)) {
  for (const TensorInfo& t : file.tensors()) total_bytes_ += t.nbytes;
}

Result<const TensorInfo*> WeightBinder::find(const std::string& name, std::initializer_list<int64_t> shape) const {
  const TensorInfo* t = file_.find_tensor(name);
  if (!t) return static_cast<const TensorInfo*>(nullptr);
  std::array<int64_t, kMaxDims> want{1, 1, 1, 1};
  int d = 0;
  for (int64_t v : shape) want[d++] = v;
  bool same = t->n_dims == static_cast<int>(shape.size());
  for (int k = 0; k < kMaxDims && same; ++k) same = t->shape[k] == want[k];
  if (!same)
    return malformed_file(file_.path() + ": " + name + ": expected " + shape_string(static_cast<int>(shape.size()), want) +
                          ", found " + shape_string(t->n_dims, t->shape));
  return t;
}

Result<const TensorInfo*> WeightBinder::optional(const std::string& name, std::initializer_list<int64_t> shape) const {
  INFER_ASSIGN_OR_RETURN(const TensorInfo* t, find(name, shape));
  if (t && !can_dequantize(t->dtype))
    return unsupported(file_.path() + ": " + name + ": weight type " + std::string(dtype_name(t->dtype)) +
                       " is not supported yet");
  return t;
}

Result<const TensorInfo*> WeightBinder::require(const std::string& name, std::initializer_list<int64_t> shape) const {
  auto t = optional(name, shape);
  if (t.ok() && *t == nullptr) return malformed_file(file_.path() + ": missing tensor " + name);
  return t;
}

namespace {

// Weight t converted into `type` (the same shape) by fill(dst), which writes its rows: the buffer
// kept in `store`, the tensor's entry returned; fill's error named after `where`.
Result<const TensorInfo*> store_converted(std::deque<ConvertedTensor>& store, const TensorInfo& t, DType type,
                                          const std::string& where, const std::function<Status(void*)>& fill) {
  const int64_t n = t.shape[0], rows = t.view.rows();
  const auto row_bytes = dtype_row_bytes(type, static_cast<uint64_t>(n));
  if (!row_bytes) return invalid_argument(where + ": row size overflows");
  ConvertedTensor c;
  INFER_ASSIGN_OR_RETURN(c.data, AlignedBuffer::allocate(*row_bytes * static_cast<size_t>(rows)));
  const Status converted = fill(c.data.data());
  if (!converted.is_ok()) return Status(converted.code(), where + ": " + converted.message());
  c.info = t;
  c.info.dtype = type;
  c.info.nbytes = *row_bytes * static_cast<uint64_t>(rows);
  c.info.view = TensorView::contiguous(type, t.n_dims, t.shape, c.data.data());
  store.push_back(std::move(c));
  return &store.back().info;
}

}  // namespace

Result<const TensorInfo*> WeightBinder::matrix(const std::string& name, std::initializer_list<int64_t> shape) {
  INFER_ASSIGN_OR_RETURN(const TensorInfo* t, optional_matrix(name, shape));
  if (!t) return malformed_file(file_.path() + ": missing tensor " + name);
  return t;
}

Result<const TensorInfo*> WeightBinder::optional_matrix(const std::string& name, std::initializer_list<int64_t> shape) {
  INFER_ASSIGN_OR_RETURN(const TensorInfo* t, find(name, shape));
  if (t && (t->dtype == DType::i8 || t->dtype == DType::f8_e4m3)) return from_checkpoint(t);
  if (t && t->dtype == DType::i4_packed) return from_packed_int4(t);
  INFER_ASSIGN_OR_RETURN(t, optional(name, shape));
  if (!t) return t;
  return convert(t);
}

// A compressed-tensors weight (INT8 or FP8 E4M3 codes, row major [rows, n]) and its scales
// ("<name>_scale", F32: one per row or one for the matrix, as format/hf_directory.cpp names them)
// in libinfer's row layouts: I8_ROW, F8E4M3_ROW or (one scale) F8E4M3_TENSOR, or F8E4M3_W8A8 where
// the checkpoint's scheme quantizes activations to FP8. The codes and scales are kept exactly
// (quant/int8_rows.hpp, quant/fp8_rows.hpp).
Result<const TensorInfo*> WeightBinder::from_checkpoint(const TensorInfo* t) {
  if (progress_ && total_bytes_ > 0) {
    bound_bytes_ += t->nbytes;
    progress_(std::min(1.0, static_cast<double>(bound_bytes_) / static_cast<double>(total_bytes_)));
  }
  const std::string where = file_.path() + ": " + t->name;
  const TensorInfo* scale = file_.find_tensor(t->name + "_scale");
  const int64_t n = t->shape[0], rows = t->view.rows();
  if (scale && scale->n_dims == 2 && t->dtype == DType::i8) return from_int8_groups(t, scale);
  if (!scale || scale->dtype != DType::f32 || scale->n_dims != 1)
    return malformed_file(where + ": an " + std::string(dtype_name(t->dtype)) + " weight needs its F32 scales (" +
                          t->name + "_scale)");
  const int64_t n_scales = scale->shape[0];
  if (n_scales != rows && n_scales != 1)
    return malformed_file(where + ": " + std::to_string(n_scales) + " scales for " + std::to_string(rows) +
                          " rows (one per row or one for the matrix)");
  if (!store_) return invalid_argument(where + ": quantized checkpoint weights need a store to convert into");
  const bool is_int = t->dtype == DType::i8;
  // FP8: W8A8 where the scheme quantizes activations (one type for either scale count: a per-tensor
  // scale is stored in every row), else weight-only. INT8: W8A8 unless the scheme leaves
  // activations unquantized (W8A16: the same rows, weight-only).
  const bool w8a8 = !is_int && file_.metadata().get_bool(hf::kFp8ActivationsKey).value_or(false);
  const bool int8_weight_only = is_int && file_.metadata().get_bool(hf::kInt8WeightOnlyKey).value_or(false);
  const DType type = is_int ? (int8_weight_only ? DType::i8_w8a16 : DType::i8_row)
                     : w8a8 ? DType::f8_w8a8
                            : (n_scales == 1 && rows > 1 ? DType::f8_tensor : DType::f8_row);
  const auto* codes = static_cast<const uint8_t*>(t->view.data);
  const std::span<const float> scales(static_cast<const float*>(scale->view.data), static_cast<size_t>(n_scales));
  const size_t count = static_cast<size_t>(rows) * static_cast<size_t>(n);
  return store_converted(*store_, *t, type, where, [&](void* dst) {
    return is_int ? i8_rows_from_compressed({{reinterpret_cast<const int8_t*>(codes), count}, scales, rows, n}, dst)
                  : f8_rows_from_compressed({{codes, count}, scales, rows, n}, dst);
  });
}

// A compressed-tensors pack-quantized INT4 weight (I4_PACKED [rows, n]: eight values to an int32),
// its group scales ("<name>_scale", F32 [rows, groups]) and, for asymmetric weights, its zero
// points ("<name>_zero_point", I8 [rows, groups], unpacked by format/hf_directory.cpp), as blocks
// of the largest INT4 type whose group divides the checkpoint's (quant/int4_groups.hpp), exactly.
Result<const TensorInfo*> WeightBinder::from_packed_int4(const TensorInfo* t) {
  if (progress_ && total_bytes_ > 0) {
    bound_bytes_ += t->nbytes;
    progress_(std::min(1.0, static_cast<double>(bound_bytes_) / static_cast<double>(total_bytes_)));
  }
  const std::string where = file_.path() + ": " + t->name;
  const int64_t n = t->shape[0], rows = t->view.rows();
  // Group scales [rows, groups] (2-D), or one per row (channel: [rows] as the format layer gives
  // [rows, 1]).
  const TensorInfo* scale = file_.find_tensor(t->name + "_scale");
  const bool per_row = scale && scale->n_dims == 1 && scale->shape[0] == rows;
  if (!scale || scale->dtype != DType::f32 || (!per_row && (scale->n_dims != 2 || scale->shape[1] != rows)) ||
      scale->shape[0] < 1 || n % (per_row ? 1 : scale->shape[0]) != 0)
    return malformed_file(where + ": an INT4 weight needs its group scales (" + t->name + "_scale, [" +
                          std::to_string(rows) + ", groups] with groups dividing " + std::to_string(n) + ")");
  const int64_t groups = per_row ? 1 : scale->shape[0], group = n / groups;
  const TensorInfo* zero = file_.find_tensor(t->name + "_zero_point");
  if (zero && (zero->dtype != DType::i8 || zero->n_dims != 2 || zero->shape[0] != groups || zero->shape[1] != rows))
    return malformed_file(where + ": its zero points are not I8 [" + std::to_string(rows) + ", " + std::to_string(groups) + "]");
  std::optional<DType> type;
  for (int64_t g : {128, 64, 32})
    if (!type && group % g == 0) type = i4_type_of_group(g);
  if (!type)
    return unsupported(where + ": groups of " + std::to_string(group) + " columns (INT4 groups must be a multiple of 32)");
  if (!store_) return invalid_argument(where + ": quantized checkpoint weights need a store to convert into");
  const auto count = static_cast<size_t>(rows) * static_cast<size_t>(n);
  std::vector<int8_t> values(count);
  unpack_int4_words(static_cast<const int32_t*>(t->view.data), static_cast<int64_t>(count), values.data());
  const auto n_scales = static_cast<size_t>(rows * groups);
  Int4GroupWeight w{values, {static_cast<const float*>(scale->view.data), n_scales}, {}, rows, n, group};
  if (zero) w.zero_point = {static_cast<const int8_t*>(zero->view.data), n_scales};
  return store_converted(*store_, *t, *type, where, [&](void* dst) { return i4_rows_from_compressed(w, *type, dst); });
}

// A compressed-tensors INT8 weight in groups (W8A16: I8 [rows, n], unpacked by format/hf_directory.cpp
// from its pack-quantized words) and its group scales ("<name>_scale", F32 [rows, groups]), as
// blocks of the largest INT8 group type whose group divides the checkpoint's
// (quant/int8_groups.hpp), exactly. Progress was counted by from_checkpoint.
Result<const TensorInfo*> WeightBinder::from_int8_groups(const TensorInfo* t, const TensorInfo* scale) {
  const std::string where = file_.path() + ": " + t->name;
  const int64_t n = t->shape[0], rows = t->view.rows();
  if (!file_.metadata().get_bool(hf::kInt8WeightOnlyKey).value_or(false))
    return unsupported(where + ": INT8 weights in groups with quantized activations (W8A8) are not supported (W8A16 is)");
  if (scale->dtype != DType::f32 || scale->shape[1] != rows || scale->shape[0] < 1 || n % scale->shape[0] != 0)
    return malformed_file(where + ": an INT8 group weight needs its group scales (" + t->name + "_scale, [" +
                          std::to_string(rows) + ", groups] with groups dividing " + std::to_string(n) + ")");
  const int64_t groups = scale->shape[0], group = n / groups;
  std::optional<DType> type;
  for (int64_t g : {128, 64, 32})
    if (!type && group % g == 0) type = i8_type_of_group(g);
  if (!type)
    return unsupported(where + ": groups of " + std::to_string(group) + " columns (INT8 groups must be a multiple of 32)");
  if (!store_) return invalid_argument(where + ": quantized checkpoint weights need a store to convert into");
  const auto count = static_cast<size_t>(rows) * static_cast<size_t>(n);
  const Int8GroupWeight w{{static_cast<const int8_t*>(t->view.data), count},
                          {static_cast<const float*>(scale->view.data), static_cast<size_t>(rows * groups)},
                          rows,
                          n,
                          group};
  return store_converted(*store_, *t, *type, where, [&](void* dst) { return i8_groups_from_compressed(w, *type, dst); });
}

Result<const TensorInfo*> WeightBinder::convert(const TensorInfo* t) {
  if (progress_ && total_bytes_ > 0) {
    bound_bytes_ += t->nbytes;
    progress_(std::min(1.0, static_cast<double>(bound_bytes_) / static_cast<double>(total_bytes_)));
  }
  if (!weight_type_ || !store_ || t->dtype == *weight_type_) return t;
  const bool is_float = !dtype_traits(t->dtype)->quantized;  // F32, F16 or BF16 (computable)
  const int64_t n = t->shape[0], rows = t->view.rows();
  const auto block = static_cast<int64_t>(dtype_traits(*weight_type_)->block_size);
  if (!is_float || n % block != 0) return t;  // already quantized, or rows not made of whole blocks
  if (*weight_type_ == DType::i8_row && n > kI8RowMaxElements) return t;  // its integer dots could overflow
  // libinfer's INT8 / FP8 formats quantize the linear layers only, as compressed-tensors checkpoints
  // do: the embedding is no linear layer, and the recipes leave lm_head unquantized.
  if (dtype_traits(*weight_type_)->internal && (t->name == "token_embd.weight" || t->name == "output.weight")) return t;
  const RowFromFloat quantize = cpu_type_traits(*weight_type_)->from_float;
  const auto row_bytes = dtype_row_bytes(*weight_type_, static_cast<uint64_t>(n));
  if (!row_bytes) return invalid_argument(t->name + ": row size overflows");
  ConvertedTensor c;
  INFER_ASSIGN_OR_RETURN(c.data, AlignedBuffer::allocate(*row_bytes * static_cast<size_t>(rows)));
  std::vector<float> row(static_cast<size_t>(n));
  auto* out = c.data.as<uint8_t>();
  // INT8 W8A8: W H stored, x rotated online (TensorInfo::input_rotation), unless the file's
  // weight is rotated already (its rotation stays).
  const int32_t rotation = *weight_type_ == DType::i8_row && rotate_int8_ && t->input_rotation == 0 ? i8_input_rotation(n) : 0;
  // FP8 with one scale per matrix: max|W| first.
  const bool per_tensor = *weight_type_ == DType::f8_tensor;
  float amax = 0.0f;
  for (int64_t r = 0; per_tensor && r < rows; ++r) {
    dequantize_row(t->dtype, t->view.row(r), row.data(), n);
    for (float v : row) amax = std::max(amax, std::fabs(v));
  }
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t->dtype, t->view.row(r), row.data(), n);
    for (float v : row)
      if (!std::isfinite(v)) return malformed_file(file_.path() + ": " + t->name + ": a weight is not finite (cannot quantize)");
    void* dst = out + static_cast<size_t>(r) * *row_bytes;
    if (rotation > 0) hadamard_inplace(row.data(), n, rotation);
    if (per_tensor) quantize_row_f8_scaled(row.data(), dst, n, amax / 448.0f);
    else quantize(row.data(), dst, n);
  }
  c.info = *t;
  c.info.dtype = *weight_type_;
  if (rotation > 0) c.info.input_rotation = rotation;
  c.info.nbytes = *row_bytes * static_cast<uint64_t>(rows);
  c.info.view = TensorView::contiguous(*weight_type_, t->n_dims, t->shape, c.data.data());
  store_->push_back(std::move(c));
  return &store_->back().info;
}

Result<AlignedBuffer> WeightBinder::load_f32(const TensorInfo& t) const {
  auto buf = AlignedBuffer::allocate(static_cast<size_t>(t.numel()) * sizeof(float));
  if (!buf.ok()) return buf.status();
  for (int64_t r = 0; r < t.view.rows(); ++r)
    dequantize_row(t.dtype, t.view.row(r), buf->as<float>() + r * t.shape[0], t.shape[0]);
  return buf;
}

Result<int64_t> require_int(const ModelFile& f, const std::string& key) {
  const Value* v = f.metadata().find(key);
  if (!v) return malformed_file(f.path() + ": missing metadata key " + key);
  auto i = v->as_integer();
  if (!i || v->type() == ValueType::boolean)
    return malformed_file(f.path() + ": metadata key " + key + " must be an integer, found " + value_type_name(v->type()));
  return *i;
}

int64_t optional_int(const ModelFile& f, const std::string& key, int64_t fallback) {
  auto v = f.metadata().get_integer(key);
  return v ? *v : fallback;
}

Result<double> optional_number(const ModelFile& f, const std::string& key, double fallback) {
  const Value* v = f.metadata().find(key);
  if (!v) return fallback;
  auto n = v->as_number();
  if (!n || v->type() == ValueType::boolean)
    return malformed_file(f.path() + ": metadata key " + key + " must be a number, found " + value_type_name(v->type()));
  return *n;
}

}  // namespace infer
