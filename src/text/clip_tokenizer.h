// CLIP's byte-level BPE tokenizer, reproducing Hugging Face's CLIPTokenizer (transformers 5, whose
// pipeline is: special tokens cut out of the raw text; NFC, every run of Unicode white space to one
// space, per-character lower case; split by CLIP's pattern; bytes to printable characters; BPE with
// "</w>" closing each word; <|startoftext|> ... <|endoftext|>, truncated and padded to 77).
//
// Reads a model folder's tokenizer/ (vocab.json + merges.txt, or tokenizer.json alone) and the pad
// token from its special_tokens_map.json or tokenizer_config.json (SD1.x pads with <|endoftext|>,
// SD2.x with "!").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hd {

// Throws Error ("<what> is not valid UTF-8") unless `text` is well-formed UTF-8.
void require_utf8(std::string_view text, std::string_view what);

class ClipTokenizer {
 public:
  static constexpr int kContextLength = 77;

  // `folder` holds vocab.json + merges.txt or tokenizer.json; throws Error naming what is missing.
  // `pad_override` replaces the pad token the folder's files say.
  static ClipTokenizer load(const std::string& folder, const std::optional<std::string>& pad_override = std::nullopt);
  // From the two files' contents (tests, and tokenizer.json after extraction).
  static ClipTokenizer from_vocab_and_merges(const std::string& vocab_json, const std::vector<std::string>& merges,
                                             const std::string& pad_token);

  // The 77 ids of `prompt` (UTF-8; throws Error when it is not).
  std::vector<int32_t> encode(std::string_view prompt) const;
  // The BPE tokens of `prompt` before ids, bos/eos and padding (for diagnostics and tests).
  std::vector<std::string> tokenize(std::string_view prompt) const;

  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  int32_t pad_id() const { return pad_; }
  size_t vocab_size() const { return vocab_.size(); }

 private:
  std::vector<std::string> bpe(const std::string& word) const;
  int32_t id_of(const std::string& token) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<std::string, int32_t> merge_ranks_;  // "left right" -> rank
  std::vector<std::string> added_tokens_;                 // matched in the raw text first
  int32_t bos_ = 0, eos_ = 0, pad_ = 0;
};

}  // namespace hd
