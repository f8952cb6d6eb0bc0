// AUTOMATIC1111's extra networks in a prompt: "<lora:NAME>", "<lora:NAME:SCALE>" and
// "<lora:NAME:TE:UNET>" (or te=/unet=) ask for a LoRA of the server's LoRA folder. A1111 takes each tag out
// of the text before encoding it; so does this.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "serve/engine.h"

namespace hd::server {

struct PromptNetworks {
  std::string prompt;                     // without the tags
  std::vector<serve::LoraRequest> loras;  // in the prompt's order
};

// Any other network (<hypernet:...>, <lyco:...>) or LoRA argument (A1111's dyn=, a fourth number, a
// scale that is not a finite number) is an Error (kInvalidInput) naming the tag: read as text it would
// draw another picture. `field` names the prompt in messages.
PromptNetworks take_extra_networks(std::string_view prompt, std::string_view field);

}  // namespace hd::server
