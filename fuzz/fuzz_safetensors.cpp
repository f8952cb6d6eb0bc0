// libFuzzer target for the safetensors reader: any byte string must either validate or raise
// hd::Error; never crash, hang, read out of bounds or allocate without bound. Built by the `fuzz`
// preset (clang, with ASan + UBSan); CI runs it for a minute from the seed corpus in fuzz/corpus/.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto st = hd::SafetensorsFile::from_bytes({data, size}, "fuzz");
    // A file that validated must be fully usable: load every float tensor the engine can hold.
    for (const auto& e : st.entries()) {
      if (e.dtype && hd::is_floating(*e.dtype) && e.shape.size() <= size_t(hd::kMaxRank)) {
        (void)st.load(e, hd::DType::kF32);
      }
    }
  } catch (const hd::Error&) {
  }
  return 0;
}
