// The model `hipdiffusion generate` uses when no --model is given: the small shapes model trained by
// tools/train_tiny/, which ships in the repository (models/shapes-tiny) so that a fresh checkout draws
// a meaningful picture with no download.
#pragma once

#include <string>

namespace hd {

// The folder of the default model: the installed copy if there is one, else the source tree's. Throws
// an Error naming both places when neither holds it.
std::string default_model_folder();

}  // namespace hd
