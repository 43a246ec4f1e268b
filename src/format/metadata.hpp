// Typed metadata of a model file: GGUF's key/value pairs, in file order.
//
// A Value holds one of the thirteen GGUF value types; its variant index *is* the GGUF type id.
// Arrays keep numeric elements packed (as in the file) so a 262k-entry score table costs what it
// costs on disk, not forty bytes per element.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "infer/status.hpp"

namespace infer {

enum class ValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
inline constexpr uint32_t kValueTypeCount = 13;

// "u32", "string", "array", ...
const char* value_type_name(ValueType t) noexcept;
// Bytes of one element in a file for fixed-size types; 0 for string and array.
uint32_t value_type_size(ValueType t) noexcept;

class Value;

// A homogeneous array. Exactly one of the three stores is used, chosen by elem_type.
struct Array {
  ValueType elem_type = ValueType::u8;
  uint64_t count = 0;
  std::vector<uint8_t> packed;       // fixed-size elements, little-endian, count * size bytes
  std::vector<std::string> strings;  // elem_type == string
  std::vector<Array> arrays;         // elem_type == array (nested arrays)

  // Packed elements as T; T must match elem_type in size (checked by the caller through
  // elem_type). Empty span when elem_type is string or array.
  template <class T>
  std::span<const T> as() const {
    if (packed.size() != count * sizeof(T)) return {};
    return {reinterpret_cast<const T*>(packed.data()), static_cast<size_t>(count)};
  }
  // Element i as a double / int64 for any numeric element type (bool counts as 0/1).
  std::optional<double> number_at(uint64_t i) const;
  std::optional<int64_t> integer_at(uint64_t i) const;

  template <class T>
  static Array of(ValueType type, std::span<const T> values) {
    Array a;
    a.elem_type = type;
    a.count = values.size();
    a.packed.resize(values.size_bytes());
    if (!values.empty()) std::memcpy(a.packed.data(), values.data(), values.size_bytes());
    return a;
  }
  static Array of_strings(std::vector<std::string> values);
  static Array of_arrays(std::vector<Array> values);

  bool operator==(const Array& other) const = default;
};

class Value {
 public:
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, Array, uint64_t, int64_t, double>;

  Value() : v_(uint8_t{0}) {}
  template <class T, class = std::enable_if_t<std::is_constructible_v<Storage, T&&>>>
  Value(T&& v) : v_(std::forward<T>(v)) {}  // NOLINT: implicit by design
  Value(const char* s) : v_(std::string(s)) {}  // NOLINT

  ValueType type() const noexcept { return static_cast<ValueType>(v_.index()); }
  const Storage& storage() const noexcept { return v_; }

  template <class T>
  const T* get_if() const noexcept { return std::get_if<T>(&v_); }

  // Any integer type (and bool) widened; nullopt for other types or a u64 above INT64_MAX.
  std::optional<int64_t> as_integer() const noexcept;
  // Any numeric type as double.
  std::optional<double> as_number() const noexcept;
  const std::string* as_string() const noexcept { return get_if<std::string>(); }
  const Array* as_array() const noexcept { return get_if<Array>(); }

  bool operator==(const Value& other) const = default;

 private:
  Storage v_;
};

// Ordered key/value map: iteration follows insertion (file) order, lookup is hashed.
class Metadata {
 public:
  struct Entry {
    std::string key;
    Value value;
    bool operator==(const Entry& other) const = default;
  };

  // Adds or replaces; replacing keeps the original position.
  void set(std::string key, Value value);
  // Adds; false (and no change) if the key exists already.
  bool insert(std::string key, Value value);
  bool erase(std::string_view key);

  const Value* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  size_t size() const noexcept { return entries_.size(); }
  const std::vector<Entry>& entries() const noexcept { return entries_; }

  // Typed lookups: nullopt / nullptr when the key is missing or holds another kind of value.
  std::optional<int64_t> get_integer(std::string_view key) const;
  std::optional<double> get_number(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  const std::string* get_string(std::string_view key) const;
  const Array* get_array(std::string_view key) const;

  bool operator==(const Metadata& other) const { return entries_ == other.entries_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t, Hash, std::equal_to<>> index_;
};

// Human-readable rendering of a value; arrays longer than `max_items` are elided
// ("[1, 2, 3, ... (262144 items)]"). Strings are quoted and escaped.
std::string value_to_string(const Value& v, size_t max_items = 8);
// JSON rendering; arrays longer than `max_items` are cut (the caller reports the count).
std::string value_to_json(const Value& v, size_t max_items = SIZE_MAX);
// JSON string literal with escapes (invalid UTF-8 bytes become U+FFFD).
std::string json_quote(std::string_view s);
// The string a JSON string literal (with its quotes, nothing after them) stands for: escapes
// decoded, \uXXXX surrogate pairs joined into UTF-8. invalid_argument names what is wrong.
Result<std::string> json_unquote(std::string_view literal);

}  // namespace infer
