#include "text/clip_tokenizer.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace hd {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kBos = "<|startoftext|>";
constexpr std::string_view kEos = "<|endoftext|>";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  HD_CHECK(in.good(), p.string(), ": cannot read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// GPT-2's reversible map from bytes to printable characters: printable Latin-1 bytes map to
// themselves, the others to U+0100 upwards, in byte order. Returned as UTF-8 strings.
const std::vector<std::string>& byte_encoder() {
  static const std::vector<std::string> table = [] {
    std::vector<int> code(256, -1);
    const auto keep = [&](int lo, int hi) {
      for (int b = lo; b <= hi; ++b) code[size_t(b)] = b;
    };
    keep('!', '~');
    keep(0xA1, 0xAC);
    keep(0xAE, 0xFF);
    int next = 256;
    for (int b = 0; b < 256; ++b)
      if (code[size_t(b)] < 0) code[size_t(b)] = next++;
    std::vector<std::string> out(256);
    for (int b = 0; b < 256; ++b) {
      icu::UnicodeString(UChar32(code[size_t(b)])).toUTF8String(out[size_t(b)]);
    }
    return out;
  }();
  return table;
}

bool is_letter(UChar32 c) { return (U_GET_GC_MASK(c) & U_GC_L_MASK) != 0; }
bool is_number(UChar32 c) { return (U_GET_GC_MASK(c) & U_GC_N_MASK) != 0; }
bool is_space(UChar32 c) { return u_hasBinaryProperty(c, UCHAR_WHITE_SPACE); }

// NFC, white-space runs to one space, full Unicode lower case: the normalizer of CLIPTokenizer.
icu::UnicodeString normalize(std::string_view prompt) {
  const icu::UnicodeString raw = icu::UnicodeString::fromUTF8(icu::StringPiece(prompt.data(), int32_t(prompt.size())));
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  HD_CHECK_KIND(U_SUCCESS(status), ErrorKind::kRuntime, "ICU NFC normalizer unavailable: ", u_errorName(status));
  const icu::UnicodeString composed = nfc->normalize(raw, status);
  HD_CHECK_KIND(U_SUCCESS(status), ErrorKind::kRuntime, "NFC normalisation failed: ", u_errorName(status));
  icu::UnicodeString spaced;
  bool in_space = false;
  for (int32_t i = 0; i < composed.length(); i = composed.moveIndex32(i, 1)) {
    const UChar32 c = composed.char32At(i);
    if (is_space(c)) {
      if (!in_space) spaced.append(UChar32(' '));
      in_space = true;
    } else {
      spaced.append(c);
      in_space = false;
    }
  }
  // Lower case one character at a time (full mappings, no context), as the tokenizers library does:
  // a final capital sigma becomes σ, not ς.
  icu::UnicodeString lowered;
  for (int32_t i = 0; i < spaced.length(); i = spaced.moveIndex32(i, 1)) {
    lowered.append(icu::UnicodeString(spaced.char32At(i)).toLower(icu::Locale::getRoot()));
  }
  return lowered;
}

// CLIP's pre-tokenizer pattern, in order of its alternatives:
//   <|startoftext|> | <|endoftext|> | 's|'t|'re|'ve|'m|'ll|'d | \p{L}+ | \p{N} | [^\s\p{L}\p{N}]+
std::vector<icu::UnicodeString> split_words(const icu::UnicodeString& text) {
  std::vector<icu::UnicodeString> words;
  const int32_t n = text.length();
  int32_t i = 0;
  const auto starts_with = [&](int32_t at, std::u16string_view lit) {
    const auto len = int32_t(lit.size());
    return at + len <= n && text.compare(at, len, icu::UnicodeString(lit.data(), len)) == 0;
  };
  while (i < n) {
    const UChar32 c = text.char32At(i);
    int32_t end = -1;
    for (std::u16string_view special : {std::u16string_view(u"<|startoftext|>"), std::u16string_view(u"<|endoftext|>")}) {
      if (end < 0 && starts_with(i, special)) end = i + int32_t(special.size());
    }
    if (end < 0 && c == '\'') {
      for (std::u16string_view suffix : {u"'s", u"'t", u"'re", u"'ve", u"'m", u"'ll", u"'d"}) {
        if (end < 0 && starts_with(i, suffix)) end = i + int32_t(suffix.size());
      }
    }
    if (end < 0 && is_letter(c)) {
      end = i;
      while (end < n && is_letter(text.char32At(end))) end = text.moveIndex32(end, 1);
    }
    if (end < 0 && is_number(c)) end = text.moveIndex32(i, 1);
    if (end < 0 && !is_space(c)) {
      end = i;
      while (end < n) {
        const UChar32 d = text.char32At(end);
        if (is_space(d) || is_letter(d) || is_number(d)) break;
        end = text.moveIndex32(end, 1);
      }
    }
    if (end < 0) {  // white space separates words and is dropped
      i = text.moveIndex32(i, 1);
      continue;
    }
    words.push_back(icu::UnicodeString(text, i, end - i));
    i = end;
  }
  return words;
}

// Splits a UTF-8 string into its characters (each a UTF-8 string).
std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const size_t len = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace

// ICU would silently substitute U+FFFD for bad bytes, so text is checked before it reaches ICU.
void require_utf8(std::string_view text, std::string_view what) {
  HD_CHECK(text.size() < size_t(std::numeric_limits<int32_t>::max()), what, " is too long");
  int32_t length = 0;
  UErrorCode status = U_ZERO_ERROR;
  u_strFromUTF8(nullptr, 0, &length, text.data(), int32_t(text.size()), &status);
  HD_CHECK(status == U_BUFFER_OVERFLOW_ERROR || status == U_ZERO_ERROR || status == U_STRING_NOT_TERMINATED_WARNING,
           what, " is not valid UTF-8");
}

ClipTokenizer ClipTokenizer::from_vocab_and_merges(const std::string& vocab_json, const std::vector<std::string>& merges,
                                                   const std::string& pad_token) {
  ClipTokenizer t;
  const auto j = nlohmann::json::parse(vocab_json, nullptr, false);
  HD_CHECK(j.is_object(), "tokenizer vocabulary is not a JSON object of token ids");
  for (const auto& [token, id] : j.items()) {
    HD_CHECK(id.is_number_integer(), "tokenizer vocabulary: id of '", token, "' is not an integer");
    t.vocab_.emplace(token, id.get<int32_t>());
  }
  for (size_t rank = 0; rank < merges.size(); ++rank) t.merge_ranks_.emplace(merges[rank], int32_t(rank));
  t.bos_ = t.id_of(std::string(kBos));
  t.eos_ = t.id_of(std::string(kEos));
  HD_CHECK(t.vocab_.count(std::string(kBos)) && t.vocab_.count(std::string(kEos)),
           "tokenizer vocabulary lacks <|startoftext|> or <|endoftext|>: not a CLIP vocabulary");
  const auto pad = t.vocab_.find(pad_token);
  HD_CHECK(pad != t.vocab_.end(), "tokenizer pad token '", pad_token, "' is not in the vocabulary");
  t.pad_ = pad->second;
  t.added_tokens_ = {std::string(kBos), std::string(kEos)};
  if (pad_token != kBos && pad_token != kEos) t.added_tokens_.push_back(pad_token);
  return t;
}

ClipTokenizer ClipTokenizer::load(const std::string& folder, const std::optional<std::string>& pad_override) {
  const fs::path dir(folder);
  HD_CHECK(fs::is_directory(dir), folder, ": no tokenizer folder");
  // The pad token: SD2.x saves "!" in special_tokens_map.json / tokenizer_config.json.
  std::string pad_token(kEos);
  for (const char* name : {"special_tokens_map.json", "tokenizer_config.json"}) {
    if (pad_override) break;
    const fs::path p = dir / name;
    if (!fs::is_regular_file(p)) continue;
    const auto j = nlohmann::json::parse(read_file(p), nullptr, false);
    HD_CHECK(!j.is_discarded() && j.is_object(), p.string(), ": not a JSON object");
    if (!j.contains("pad_token")) continue;
    const auto& pad = j["pad_token"];
    if (pad.is_string()) pad_token = pad.get<std::string>();
    if (pad.is_object() && pad.contains("content") && pad["content"].is_string()) pad_token = pad["content"].get<std::string>();
    break;
  }
  if (pad_override) pad_token = *pad_override;
  const auto with_context = [&](const fs::path& p, auto&& fn) {
    try {
      return fn();
    } catch (Error& e) {
      e.add_context("in " + p.string());
      throw;
    }
  };
  if (fs::is_regular_file(dir / "vocab.json") && fs::is_regular_file(dir / "merges.txt")) {
    std::vector<std::string> merges;
    std::istringstream lines(read_file(dir / "merges.txt"));
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("#version") || line.empty()) continue;
      merges.push_back(line);
    }
    return with_context(dir / "vocab.json",
                        [&] { return from_vocab_and_merges(read_file(dir / "vocab.json"), merges, pad_token); });
  }
  const fs::path single = dir / "tokenizer.json";
  HD_CHECK(fs::is_regular_file(single), folder, ": no tokenizer (expected vocab.json + merges.txt or tokenizer.json)");
  return with_context(single, [&] {
    const auto j = nlohmann::json::parse(read_file(single), nullptr, false);
    HD_CHECK(!j.is_discarded() && j.contains("model") && j["model"].contains("vocab") && j["model"].contains("merges"),
             "not a BPE tokenizer.json (no model.vocab and model.merges)");
    std::vector<std::string> merges;
    for (const auto& m : j["model"]["merges"]) {
      if (m.is_string()) {
        merges.push_back(m.get<std::string>());  // older files: "left right"
      } else {
        HD_CHECK(m.is_array() && m.size() == 2, "a merge is neither \"a b\" nor [\"a\", \"b\"]");
        merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      }
    }
    return from_vocab_and_merges(j["model"]["vocab"].dump(), merges, pad_token);
  });
}

int32_t ClipTokenizer::id_of(const std::string& token) const {
  const auto it = vocab_.find(token);
  if (it != vocab_.end()) return it->second;
  const auto unk = vocab_.find(std::string(kEos));  // CLIP's unknown token is <|endoftext|>
  return unk != vocab_.end() ? unk->second : 0;
}

std::vector<std::string> ClipTokenizer::bpe(const std::string& word) const {
  std::vector<std::string> parts = utf8_chars(word);
  if (parts.empty()) return parts;
  parts.back() += "</w>";
  for (;;) {
    int32_t best_rank = std::numeric_limits<int32_t>::max();
    size_t best = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto it = merge_ranks_.find(parts[i] + " " + parts[i + 1]);
      if (it != merge_ranks_.end() && it->second < best_rank) {
        best_rank = it->second;
        best = i;
      }
    }
    if (best_rank == std::numeric_limits<int32_t>::max()) break;
    // Merge every occurrence of the best pair, left to right.
    const std::string left = parts[best], right = parts[best + 1];
    std::vector<std::string> merged;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i + 1 < parts.size() && parts[i] == left && parts[i + 1] == right) {
        merged.push_back(left + right);
        ++i;
      } else {
        merged.push_back(parts[i]);
      }
    }
    parts.swap(merged);
  }
  return parts;
}

std::vector<std::string> ClipTokenizer::tokenize(std::string_view prompt) const {
  require_utf8(prompt, "the prompt");
  std::vector<std::string> tokens;
  const auto encode_text = [&](std::string_view text) {
    for (const icu::UnicodeString& word : split_words(normalize(text))) {
      std::string utf8;
      word.toUTF8String(utf8);
      std::string mapped;
      for (unsigned char b : utf8) mapped += byte_encoder()[b];
      for (auto& piece : bpe(mapped)) tokens.push_back(std::move(piece));
    }
  };
  // The special tokens, the pad token among them, are cut out of the raw text before anything else,
  // as Hugging Face's tokenizers do with added tokens. So with SD2.x's pad token "!", every "!" in a
  // prompt is the pad token's id rather than BPE's "!</w>".
  size_t start = 0;
  while (start < prompt.size()) {
    size_t hit = std::string_view::npos;
    std::string_view matched;
    for (const std::string& special : added_tokens_) {
      const size_t at = prompt.find(special, start);
      if (at < hit || (at == hit && at != std::string_view::npos && special.size() > matched.size())) {
        hit = at;
        matched = special;
      }
    }
    encode_text(prompt.substr(start, hit == std::string_view::npos ? std::string_view::npos : hit - start));
    if (hit == std::string_view::npos) break;
    tokens.emplace_back(matched);
    start = hit + matched.size();
  }
  return tokens;
}

std::vector<int32_t> ClipTokenizer::encode(std::string_view prompt) const {
  std::vector<int32_t> ids{bos_};
  for (const std::string& token : tokenize(prompt)) {
    if (int(ids.size()) == kContextLength - 1) break;  // truncation keeps room for <|endoftext|>
    ids.push_back(id_of(token));
  }
  ids.push_back(eos_);
  ids.resize(kContextLength, pad_);
  return ids;
}

}  // namespace hd
