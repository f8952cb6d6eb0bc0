// AMD's flash attention kernel (attention_amd.cuh) on CDNA's MFMA (gfx90a, gfx942): the instruction where
// the target has it, the layout's emulation in CUDA builds.
#include "ops/gpu/attention_amd.cuh"

namespace hd::gpu {

void flash_attention_mfma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const AttentionArgs& a) {
  amd_attention::dispatch_type<Fragments16x16<amd_attention::kEmulated>>(q, k, v, out, a);
}

}  // namespace hd::gpu
