// Python's str operations on UTF-8 text, for the Jinja interpreter: Python counts, indexes and
// slices a str by code points, strips and splits on Unicode whitespace. Bytes that are not
// well-formed UTF-8 count as one character each (never an error).
//
// Case mapping (upper, lower, title, capitalize) covers ASCII, Latin-1, Greek and Cyrillic; other
// scripts are left as they are (Python maps them all; chat templates change the case of role
// names and keywords only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace infer::jinja {

// Bytes of the character at s[i] (1 for a byte that does not start a well-formed character).
size_t utf8_char_length(std::string_view s, size_t i);
// The code point of one character as utf8_char_length cut it (a lone byte: its value).
uint32_t decode_utf8_char(std::string_view c);
void append_utf8(std::string& out, uint32_t cp);

// Byte offsets of every character of s, plus s.size() at the end.
std::vector<size_t> char_offsets(std::string_view s);
size_t char_count(std::string_view s);

// str.isspace() of one character, and str.isprintable() as far as repr() needs it.
bool py_is_space(uint32_t cp);
bool py_is_printable(uint32_t cp);

// str.strip / lstrip / rstrip: `chars` absent strips whitespace.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit) and str.rsplit; sep absent splits on runs of whitespace. An empty sep
// is a ValueError (thrown as jinja::Error).
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit, bool from_right);
// str.splitlines() without keepends.
std::vector<std::string> py_splitlines(std::string_view s);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
// str.capitalize(), str.title(); jinja2's |title filter (words start after whitespace, - ( { [ <).
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);
std::string jinja_title(std::string_view s);
// markupsafe's escape: & < > " ' as HTML entities.
std::string html_escape(std::string_view s);
// str.replace(old, new, count); count < 0 replaces all.
std::string py_replace(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count);
// str.isdigit() / isalpha() / isalnum() / isupper() / islower() on ASCII letters and digits
// (false for any other character but whitespace, as far as isupper / islower go).
bool py_is_digit(std::string_view s);
bool py_is_alpha(std::string_view s);
bool py_is_alnum(std::string_view s);
bool py_is_upper(std::string_view s);
bool py_is_lower(std::string_view s);

}  // namespace infer::jinja
