// The byte-level BPE tokenizer against llama.cpp: the ids llama-tokenize gave for every case of
// cases.txt and bpe-cases.txt with SmolLM2's vocabulary (pre "smollm") and four synthetic ones
// ("llama-bpe", "qwen2", "gpt-2", "default"), and for the whole corpus with SmolLM2's (tests/reference/make-bpe-reference.sh); merge
// order on a vocabulary worked out by hand; the byte mapping; the pre-tokenizers' splits written
// from their regexes; special tokens; malformed metadata; streaming.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <map>

#include "format/model_file.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/pretokenizer.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"
#include "tokenizer/vocab.hpp"
#include "tokenizer_cases.hpp"

using namespace infer;

namespace {

const std::string kDir = std::string(INFER_TEST_DATA_DIR) + "/tokenizer/";
const char* const kVocabFiles[] = {"smollm2-vocab.gguf", "bpe-llama-bpe.gguf", "bpe-qwen2.gguf", "bpe-gpt-2.gguf",
                                   "bpe-default.gguf"};

std::unique_ptr<Tokenizer> load(const std::string& name) {
  auto file = ModelFile::open(kDir + name);
  REQUIRE(file.ok());
  auto tok = load_tokenizer(*file);
  INFO(name << ": " << (tok.ok() ? "" : tok.status().message()));
  REQUIRE(tok.ok());
  return std::move(tok).value();
}

Metadata metadata_of(const std::string& name) {
  auto file = ModelFile::open(kDir + name);
  REQUIRE(file.ok());
  return file->metadata();
}

std::vector<int32_t> encode(const Tokenizer& tok, std::string_view text, bool add_special, bool parse_special) {
  auto ids = tok.encode(text, add_special, parse_special);
  REQUIRE(ids.ok());
  return std::move(ids).value();
}

std::vector<int32_t> parse_ids(const std::string& s) {
  std::istringstream in(s);
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

std::vector<test::Case> all_cases() {
  auto cases = test::load_cases(kDir + "cases.txt");
  for (auto& c : test::load_cases(kDir + "bpe-cases.txt")) cases.push_back(std::move(c));
  REQUIRE(cases.size() >= 80);
  return cases;
}

// A vocabulary built in the test: GGUF metadata for model "gpt2".
Metadata bpe_metadata(std::vector<std::string> tokens, std::vector<std::string> merges, const std::string& pre = "gpt-2") {
  Metadata md;
  md.set("general.architecture", "llama");
  md.set("tokenizer.ggml.model", "gpt2");
  md.set("tokenizer.ggml.pre", pre);
  md.set("tokenizer.ggml.tokens", Array::of_strings(std::move(tokens)));
  md.set("tokenizer.ggml.merges", Array::of_strings(std::move(merges)));
  return md;
}

}  // namespace

TEST_CASE("BPE ids equal llama.cpp's llama-tokenize for every case, vocabulary, BOS and special-parsing setting",
          "[bpe][reference]") {
  std::map<std::string, std::unique_ptr<Tokenizer>> toks;
  for (const char* f : kVocabFiles) toks[f] = load(f);
  std::map<std::string, std::string> text;
  for (const auto& c : all_cases()) text[c.name] = c.text;
  size_t rows = 0, same = 0;
  for (const std::string& line : test::data_lines(kDir + "bpe-expected.txt")) {
    std::istringstream in(line);
    std::string vocab, name, bos, special, ids;
    std::getline(in, vocab, '\t');
    std::getline(in, name, '\t');
    std::getline(in, bos, '\t');
    std::getline(in, special, '\t');
    std::getline(in, ids);
    INFO(vocab << ", case " << name << ", bos " << bos << ", parse_special " << special);
    REQUIRE(toks.count(vocab));
    REQUIRE(text.count(name));
    const auto got = encode(*toks[vocab], text[name], bos == "1", special == "1");
    CHECK(got == parse_ids(ids));
    ++rows;
    same += got == parse_ids(ids);
  }
  CHECK(rows == 4 * text.size() * toks.size());
  CHECK(same == rows);
}

TEST_CASE("the whole corpus tokenizes to llama.cpp's ids with SmolLM2's vocabulary", "[bpe][reference]") {
  const auto tok = load("smollm2-vocab.gguf");
  const std::string corpus = test::read_text_file(std::string(INFER_TEST_DATA_DIR) + "/text/corpus.txt");
  std::vector<int32_t> expected;
  for (const std::string& line : test::data_lines(kDir + "smollm2-corpus-ids.txt")) expected.push_back(std::stoi(line));
  REQUIRE(expected.size() > 40000);
  const auto got = encode(*tok, corpus, false, false);
  CHECK(got.size() == expected.size());
  size_t first_difference = 0;
  while (first_difference < std::min(got.size(), expected.size()) && got[first_difference] == expected[first_difference])
    ++first_difference;
  INFO("first difference at id " << first_difference);
  CHECK(got == expected);
}

TEST_CASE("SmolLM2's vocabulary loads with llama.cpp's ids and flags", "[bpe]") {
  const auto tok = load("smollm2-vocab.gguf");
  CHECK(tok->vocab_size() == 49152);
  CHECK(tok->bos_id() == 1);
  CHECK(tok->eos_id() == 2);
  CHECK_FALSE(tok->add_bos());  // tokenizer.ggml.add_bos_token false
  CHECK_FALSE(tok->add_space_prefix());
  CHECK(tok->token_text(0) == "<|endoftext|>");
  CHECK(tok->is_control(1));
  CHECK(tok->is_eog(2));  // <|im_end|>, EOS
  CHECK(tok->is_eog(0));  // <|endoftext|>: one of llama.cpp's end markers
  CHECK_FALSE(tok->is_eog(1));
  // llama-bpe defaults add_bos to true when the file does not say.
  CHECK(load("bpe-llama-bpe.gguf")->add_bos());
  CHECK_FALSE(load("bpe-qwen2.gguf")->add_bos());
}

TEST_CASE("merges apply lowest rank first, leftmost on ties, whatever the order of the characters", "[bpe]") {
  // Ranks: 0 "b c", 1 "a a", 2 "a bc", 3 "aa aa", 4 "c d" (whose result is no entry).
  const auto tok = load_tokenizer(bpe_metadata({"a", "b", "c", "d", "aa", "bc", "abc", "aaaa", "Ġ"},
                                               {"b c", "a a", "a bc", "aa aa", "c d"}));
  REQUIRE(tok.ok());
  const auto& t = **tok;
  enum { a, b, c, d, aa, bc, abc, aaaa, space };
  // abcd: "b c" (rank 0) beats "a b" (no merge) → a bc d; then "a bc" (2) → abc d.
  CHECK(encode(t, "abcd", false, false) == std::vector<int32_t>{abc, d});
  // aaa: three "a a" candidates of rank 0, the leftmost goes first → aa a.
  CHECK(encode(t, "aaa", false, false) == std::vector<int32_t>{aa, a});
  // aaaa: aa a a → the pair (a a) on the right (rank 1) → aa aa → "aa aa" (3) → aaaa.
  CHECK(encode(t, "aaaa", false, false) == std::vector<int32_t>{aaaa});
  // cd merges to "cd", which is no entry: llama.cpp looks up its bytes one by one.
  CHECK(encode(t, "cd", false, false) == std::vector<int32_t>{c, d});
  // Words do not merge across the pre-tokenizer's cuts (" aa" is Ġ then aa: no "Ġ a" merge).
  CHECK(encode(t, "aa aa", false, false) == std::vector<int32_t>{aa, space, aa});
  // A character with no entry at all contributes nothing, as in llama.cpp.
  CHECK(encode(t, "axa", false, false) == std::vector<int32_t>{a, a});
}

TEST_CASE("the GPT-2 byte mapping covers all 256 bytes and decode inverts encode", "[bpe]") {
  std::set<std::string> chars;
  for (int byte = 0; byte < 256; ++byte) {
    const std::string_view ch = byte_level::char_of(static_cast<uint8_t>(byte));
    CHECK(utf8::is_one_valid_char(ch));
    CHECK(is_byte_level_char(ch));
    CHECK(ch.find(' ') == std::string_view::npos);
    chars.insert(std::string(ch));
    std::string back;
    CHECK(byte_level::decode(ch, back));
    CHECK(back == std::string(1, static_cast<char>(byte)));
  }
  CHECK(chars.size() == 256);
  CHECK(byte_level::char_of(' ') == "\xC4\xA0");   // Ġ
  CHECK(byte_level::char_of('\n') == "\xC4\x8A");  // Ċ
  CHECK(byte_level::char_of('a') == "a");

  // The synthetic vocabularies have a token for every byte character (SmolLM2's lacks a few
  // control bytes, which llama.cpp then drops, and so does libinfer).
  const auto tok = load("bpe-llama-bpe.gguf");
  std::map<std::string, int32_t, std::less<>> id_of;
  for (int32_t id = 0; id < tok->vocab_size(); ++id) id_of[std::string(tok->token_text(id))] = id;
  for (int byte = 0; byte < 256; ++byte) {
    INFO("byte " << byte);
    const auto it = id_of.find(byte_level::char_of(static_cast<uint8_t>(byte)));
    REQUIRE(it != id_of.end());
    CHECK(tok->token_to_bytes(it->second) == std::string(1, static_cast<char>(byte)));
  }
  std::string every_ascii;
  for (int byte = 0; byte < 128; ++byte) every_ascii += static_cast<char>(byte);
  CHECK(tok->decode(encode(*tok, every_ascii, false, false), {.remove_special = true}) == every_ascii);
  // Bytes that are no UTF-8 are read as U+FFFD, as llama.cpp reads them.
  CHECK(tok->decode(encode(*tok, "\xFF", false, false)) == "\xEF\xBF\xBD");
  for (const char* f : kVocabFiles) {
    const auto t = load(f);
    INFO(f);
    const std::string corpus = test::read_text_file(std::string(INFER_TEST_DATA_DIR) + "/text/corpus.txt");
    CHECK(t->decode(encode(*t, corpus, false, false)) == corpus);
    for (const auto& c : all_cases()) {
      if (!utf8::is_valid(c.text)) continue;
      INFO("case " << c.name);
      CHECK(t->decode(encode(*t, c.text, false, false)) == c.text);
      CHECK(t->decode(encode(*t, c.text, true, false), {.remove_special = true}) == c.text);
    }
  }
}

TEST_CASE("pre-tokenizers split where their regexes do", "[bpe]") {
  using V = std::vector<std::string>;
  const std::string text = "I'm 12345 ok!!\n\n  x";
  CHECK(pre_tokenize_text("gpt-2", text) == V{"I", "'m", " 12345", " ok", "!!", "\n\n ", " x"});
  // smollm: every digit alone first, then GPT-2's regex on what is between.
  CHECK(pre_tokenize_text("starcoder", text) ==
        V{"I", "'m", " ", "1", "2", "3", "4", "5", " ok", "!!", "\n\n ", " x"});
  // llama3: digits in threes, newlines join the punctuation before them.
  CHECK(pre_tokenize_text("llama3", text) == V{"I", "'m", " ", "123", "45", " ok", "!!\n\n", " ", " x"});
  // qwen2: as llama3, every digit alone.
  CHECK(pre_tokenize_text("qwen2", text) ==
        V{"I", "'m", " ", "1", "2", "3", "4", "5", " ok", "!!\n\n", " ", " x"});
  // Contractions: GPT-2's are lowercase only; llama3's any case.
  CHECK(pre_tokenize_text("gpt-2", "HE'S he's") == V{"HE", "'", "S", " he", "'s"});
  CHECK(pre_tokenize_text("llama3", "HE'S he's") == V{"HE", "'S", " he", "'s"});
  // llama3: one non-letter may lead a word; \s*[\r\n]+ keeps the spaces before a newline.
  CHECK(pre_tokenize_text("llama3", "(abc  \n\tx") == V{"(abc", "  \n", "\tx"});
  CHECK(pre_tokenize_text("gpt-2", "(abc  \n\tx") == V{"(", "abc", "  \n", "\t", "x"});
  // Unicode classes: combining marks are not letters; U+3000 is whitespace; ² is a number.
  CHECK(pre_tokenize_text("gpt-2", "e\xCC\x81t\xE3\x80\x80x\xC2\xB2") ==
        V{"e", "\xCC\x81", "t", "\xE3\x80\x80", "x", "\xC2\xB2"});
  // default: punctuation runs, GPT-2, number runs, then ASCII digit triples.
  CHECK(pre_tokenize_text("default", "x=1234;;y") == V{"x", "=", "123", "4", ";;", "y"});
  CHECK(pre_tokenize_text("gpt-2", "").empty());
}

TEST_CASE("BPE special tokens are kept whole with parse_special and are plain text without", "[bpe]") {
  const auto tok = load("smollm2-vocab.gguf");
  const std::string chat = "<|im_start|>user\nhi<|im_end|>";
  const auto parsed = encode(*tok, chat, false, true);
  REQUIRE(parsed.size() >= 3);
  CHECK(parsed.front() == 1);
  CHECK(parsed.back() == 2);
  CHECK(tok->decode(parsed) == "user\nhi");
  CHECK(tok->decode(parsed, {.render_special = true}) == chat);
  const auto plain = encode(*tok, chat, false, false);
  CHECK(std::find(plain.begin(), plain.end(), 1) == plain.end());
  CHECK(std::find(plain.begin(), plain.end(), 2) == plain.end());
  CHECK(tok->decode(plain) == chat);
  // User-defined tokens are matched always and decode to their text.
  const auto qwen = load("bpe-qwen2.gguf");
  const auto tool = encode(*qwen, "a<tool>b", false, false);
  REQUIRE(tool.size() == 3);
  CHECK(qwen->token_text(tool[1]) == "<tool>");
  CHECK(qwen->decode(tool) == "a<tool>b");
}

TEST_CASE("malformed BPE metadata is a clear error naming the key, never a crash", "[bpe]") {
  const Metadata good = metadata_of("bpe-qwen2.gguf");
  REQUIRE(load_tokenizer(good).ok());
  struct Bad {
    const char* what;
    std::function<void(Metadata&)> change;
    StatusCode code;
    const char* message;
  };
  const std::vector<int32_t> numbers(5, 1);
  const Bad bad[] = {
      {"no merges", [](Metadata& m) { m.erase("tokenizer.ggml.merges"); }, StatusCode::not_found,
       "tokenizer.ggml.merges is missing"},
      {"merges not strings",
       [&](Metadata& m) { m.set("tokenizer.ggml.merges", Array::of(ValueType::i32, std::span(numbers))); },
       StatusCode::malformed_file, "tokenizer.ggml.merges: expected an array of strings"},
      {"merges a string", [](Metadata& m) { m.set("tokenizer.ggml.merges", "a b"); }, StatusCode::malformed_file,
       "tokenizer.ggml.merges: expected an array of strings"},
      {"merge without a space", [](Metadata& m) { m.set("tokenizer.ggml.merges", Array::of_strings({"a b", "ab"})); },
       StatusCode::malformed_file, "tokenizer.ggml.merges[1] is 'ab'"},
      {"merge of a space alone", [](Metadata& m) { m.set("tokenizer.ggml.merges", Array::of_strings({" "})); },
       StatusCode::malformed_file, "tokenizer.ggml.merges[0]"},
      {"unknown pre-tokenizer", [](Metadata& m) { m.set("tokenizer.ggml.pre", "no-such-pre"); },
       StatusCode::unsupported, "tokenizer.ggml.pre 'no-such-pre' is not a supported pre-tokenizer"},
      {"pre not a string", [](Metadata& m) { m.set("tokenizer.ggml.pre", uint32_t{2}); }, StatusCode::malformed_file,
       "tokenizer.ggml.pre: expected a string"},
      {"bos out of range", [](Metadata& m) { m.set("tokenizer.ggml.bos_token_id", uint32_t{100000}); },
       StatusCode::malformed_file, "tokenizer.ggml.bos_token_id"},
      {"byte token that names no byte",
       [](Metadata& m) {
         std::vector<int32_t> types(m.find("tokenizer.ggml.token_type")->as_array()->as<int32_t>().begin(),
                                    m.find("tokenizer.ggml.token_type")->as_array()->as<int32_t>().end());
         types[0] = 6;  // "<|endoftext|>"
         m.set("tokenizer.ggml.token_type", Array::of(ValueType::i32, std::span<const int32_t>(types)));
       },
       StatusCode::malformed_file, "names no byte"},
  };
  for (const Bad& b : bad) {
    INFO(b.what);
    Metadata md = good;
    b.change(md);
    const auto tok = load_tokenizer(md);
    REQUIRE_FALSE(tok.ok());
    CHECK(tok.status().code() == b.code);
    CHECK_THAT(tok.status().message(), Catch::Contains(b.message));
  }
  // Merge parts that are no entry are kept and never match, as in llama.cpp.
  Metadata odd = good;
  odd.set("tokenizer.ggml.merges", Array::of_strings({"zz qq", "a b"}));
  REQUIRE(load_tokenizer(odd).ok());
  // An absent pre-tokenizer is llama.cpp's default one.
  Metadata no_pre = good;
  no_pre.erase("tokenizer.ggml.pre");
  REQUIRE(load_tokenizer(no_pre).ok());
}

TEST_CASE("BPE text with any bytes encodes without failing, including code points past U+10FFFF", "[bpe]") {
  const auto tok = load("smollm2-vocab.gguf");
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    const auto ids = tok->encode(s, true, round % 2 == 0);
    REQUIRE(ids.ok());
    for (const int32_t id : *ids) CHECK((id >= 0 && id < tok->vocab_size()));
  }
  CHECK(tok->encode("\xF4\x90\x80\x80 \xF7\xBF\xBF\xBF", false, false).ok());
}

TEST_CASE("the incremental detokenizer streams whole UTF-8 characters for BPE tokens", "[bpe]") {
  const auto tok = load("smollm2-vocab.gguf");
  const std::string text = "日本語 😀👍🏽 Привет مرحبا e\xCC\x81 done";
  const auto ids = encode(*tok, text, false, false);
  IncrementalDetokenizer stream(*tok);
  std::string all;
  size_t held = 0;
  for (const int32_t id : ids) {
    const std::string chunk = stream.push(id);
    CHECK(utf8::is_valid(chunk));
    held += chunk.empty();
    all += chunk;
  }
  all += stream.flush();
  CHECK(all == text);
  CHECK(held > 0);  // some characters did span several tokens
}
